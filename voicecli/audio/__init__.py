"""Audio as bytes and samples, with no devices: PCM16 carrying, MP3 frame parsing and splitting, streaming MP3
decoding, resampling and WAV files. Client, server and bench share it, so each of these jobs is done once.

Light on purpose: importing the package (or `mp3_frames`, `pcm`) pulls in nothing beyond numpy, so the endpoint
container, which does not install miniaudio or PyAV, can use the frame splitter.
"""
