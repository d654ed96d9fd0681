"""The SageMaker transports, in one place for the factory to import.

- `SageMakerBatchTransport`: InvokeEndpoint, whole audio per request (the baseline).
- `SageMakerStreamTransport`: InvokeEndpointWithResponseStream, audio as it is made, re-aligned to whole frames.
- `SageMakerBidiTransport`: InvokeEndpointWithBidirectionalStream, ONE HTTP/2 stream per chat session (the design).

All three take a `SageMakerTarget` (endpoint name, region, profile, optional endpoint_url override for a local
stand-in). The bidi one needs the `sagemaker` extra (aws-sdk-sagemaker-runtime-http2[awscrt]); it is imported
lazily, so the other two work without it.
"""

from __future__ import annotations

from voicecli.tts.sagemaker_bidi import SageMakerBidiTransport
from voicecli.tts.sagemaker_common import SageMakerTarget
from voicecli.tts.sagemaker_invoke import SageMakerBatchTransport, SageMakerStreamTransport

__all__ = ["SageMakerBatchTransport", "SageMakerBidiTransport", "SageMakerStreamTransport", "SageMakerTarget"]
