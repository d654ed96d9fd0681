"""The deployment's settings, read from CDK context and checked before anything is synthesized.

Why a separate module: CDK context arrives typed from cdk.json but as plain strings from `cdk deploy -c key=value`,
and a wrong value (a maximum below the minimum, a name SageMaker rejects) would otherwise surface only minutes into a
CloudFormation deployment. Parsing here turns both into one typed, validated object, and fails at synth time with
the -c key to fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

PREFIX = "voicecli:"
"""Every key is namespaced, so it cannot collide with CDK's own feature flags in cdk.json."""

ROUTING_STRATEGIES = ("LEAST_OUTSTANDING_REQUESTS", "RANDOM")
ENGINES = ("auto", "torch", "onnx")
_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")

ContextLookup = Callable[[str], object]
"""node.try_get_context: returns None for a key that is not set."""


class SettingsError(ValueError):
    """A context value that cannot be deployed; the message names the -c key."""


@dataclass(frozen=True)
class EndpointSettings:
    """Everything a deployment can change. Defaults mirror cdk.json (which the CLI reads; tests pass context)."""

    stack_name: str = "VoicecliKokoroEndpoint"
    endpoint_name: str = "voicecli-kokoro"
    instance_type: str = "ml.g5.xlarge"
    initial_instance_count: int = 1
    health_check_timeout_s: int = 600
    routing_strategy: str = "LEAST_OUTSTANDING_REQUESTS"
    inference_ami_version: str = "al2-ami-sagemaker-inference-gpu-3-1"
    """Host AMI (NVIDIA driver R550 / CUDA 12.4). Empty: SageMaker's default for the instance type, R470 on ml.g5."""
    network_isolation: bool = True
    """The container needs no network at run time (weights are baked in): deny it any."""
    min_capacity: int = 1
    max_capacity: int = 4
    audio_rate_per_instance: float = 14.5
    """Seconds of speech one instance synthesizes per wall second with every worker busy: `voicecli bench load`'s
    audio_rate_x at its largest session count, measured on this instance type (container/README.md, "Capacity
    model"). The default is the CPU figure measured on a 2-core machine (7.27x, 3.6x per core) times an
    ml.g5.xlarge's 4 vCPUs: a floor for the GPU, so it scales out early until the g5's own figure replaces it."""
    target_utilization: float = 0.7
    """Share of that rate the autoscaling keeps in use; the rest absorbs bursts while an instance starts."""
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60
    engine: str = "auto"
    workers: str = "auto"
    threads: str = "auto"

    @property
    def sessions_per_instance_target(self) -> int:
        """Concurrent sessions an instance should carry: each speaking session needs 1.0x real time, so the rate
        times the utilisation, rounded down. Every open session is counted as speaking (conservative)."""
        return max(1, math.floor(self.audio_rate_per_instance * self.target_utilization))

    @classmethod
    def from_context(cls, lookup: ContextLookup) -> EndpointSettings:
        """Read every `voicecli:*` key (missing ones keep their default), coerce CLI strings, validate."""
        defaults = cls()

        def text(key: str, default: str) -> str:
            value = lookup(PREFIX + key)
            return default if value is None else str(value).strip()

        def integer(key: str, default: int, low: int, high: int) -> int:
            value = lookup(PREFIX + key)
            if value is None:
                return default
            try:
                number = int(str(value).strip()) if not isinstance(value, int) else value
            except ValueError:
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected a whole number") from None
            if isinstance(value, bool) or not low <= number <= high:
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected a whole number in {low}..{high}")
            return number

        def number(key: str, default: float, low: float) -> float:
            value = lookup(PREFIX + key)
            if value is None:
                return default
            try:
                result = float(str(value).strip())
            except ValueError:
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected a number") from None
            if isinstance(value, bool) or not result > low:
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected a number above {low}")
            return result

        def flag(key: str, default: bool) -> bool:
            value = lookup(PREFIX + key)
            if value is None:
                return default
            if isinstance(value, bool):
                return value
            lowered = str(value).strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected true or false")

        def auto_count(key: str, default: str) -> str:
            value = text(key, default).lower()
            if value != "auto" and not (value.isdigit() and 1 <= int(value) <= 64):
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected auto or a whole number in 1..64")
            return value

        def choice(key: str, default: str, allowed: tuple[str, ...]) -> str:
            value = text(key, default)
            if value not in allowed:
                raise SettingsError(f"-c {PREFIX}{key}={value!r}: expected one of {', '.join(allowed)}")
            return value

        settings = cls(
            stack_name=text("stackName", defaults.stack_name),
            endpoint_name=text("endpointName", defaults.endpoint_name),
            instance_type=text("instanceType", defaults.instance_type),
            initial_instance_count=integer("initialInstanceCount", defaults.initial_instance_count, 1, 100),
            health_check_timeout_s=integer("healthCheckTimeoutSeconds", defaults.health_check_timeout_s, 60, 3600),
            routing_strategy=choice("routingStrategy", defaults.routing_strategy, ROUTING_STRATEGIES),
            inference_ami_version=text("inferenceAmiVersion", defaults.inference_ami_version),
            network_isolation=flag("networkIsolation", defaults.network_isolation),
            min_capacity=integer("minCapacity", defaults.min_capacity, 1, 100),
            max_capacity=integer("maxCapacity", defaults.max_capacity, 1, 100),
            audio_rate_per_instance=number("audioRatePerInstance", defaults.audio_rate_per_instance, 0.0),
            target_utilization=number("targetUtilization", defaults.target_utilization, 0.0),
            scale_in_cooldown_s=integer("scaleInCooldownSeconds", defaults.scale_in_cooldown_s, 0, 3600),
            scale_out_cooldown_s=integer("scaleOutCooldownSeconds", defaults.scale_out_cooldown_s, 0, 3600),
            engine=choice("engine", defaults.engine, ENGINES),
            workers=auto_count("workers", defaults.workers),
            threads=auto_count("threads", defaults.threads),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Cross-field and format checks SageMaker or CloudFormation would otherwise reject late."""
        if not _STACK_NAME.match(self.stack_name):
            raise SettingsError(f"-c {PREFIX}stackName={self.stack_name!r}: not a valid CloudFormation stack name")
        if not _ENDPOINT_NAME.match(self.endpoint_name):
            raise SettingsError(
                f"-c {PREFIX}endpointName={self.endpoint_name!r}: SageMaker endpoint names are 1-63 letters, digits"
                " and hyphens, starting and ending with a letter or digit"
            )
        if not self.instance_type.startswith("ml."):
            raise SettingsError(f"-c {PREFIX}instanceType={self.instance_type!r}: expected an ml.* instance type")
        if self.target_utilization > 1:
            raise SettingsError(f"-c {PREFIX}targetUtilization={self.target_utilization}: expected a share in (0, 1]")
        if self.min_capacity > self.max_capacity:
            raise SettingsError(
                f"-c {PREFIX}minCapacity={self.min_capacity} is above -c {PREFIX}maxCapacity={self.max_capacity}"
            )
        if not self.min_capacity <= self.initial_instance_count <= self.max_capacity:
            raise SettingsError(
                f"-c {PREFIX}initialInstanceCount={self.initial_instance_count} is outside the autoscaling range"
                f" {self.min_capacity}..{self.max_capacity}"
            )
