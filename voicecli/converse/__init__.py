"""A turn from transcript to sentences: turn taking, the pipeline, its timeline, segmentation, the race."""
