"""The SageMaker AI real-time endpoint that serves voicecli's Kokoro container, as one CDK stack.

Image asset -> execution role -> model -> endpoint config (one "primary" variant) -> endpoint -> auto scaling.
The stack is environment-agnostic (region and account come from the deploying profile), so it synthesizes with no
credentials and no network; Docker is needed only at `cdk deploy`, which builds and pushes the image.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Aws, CfnOutput, Duration, IgnoreMode, Stack
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from settings import EndpointSettings

VARIANT_NAME = "primary"
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "container/Dockerfile"
DOCKERIGNORE = REPO_ROOT / "container" / "Dockerfile.dockerignore"


def context_filter(path: Path = DOCKERIGNORE) -> list[str]:
    """The Dockerfile's ignore patterns, so CDK stages exactly the context `docker build` would see."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class KokoroEndpointStack(Stack):
    """Builds the container from this repository and runs it on a SageMaker real-time endpoint."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: EndpointSettings,
                 description: str | None = None) -> None:
        super().__init__(scope, construct_id, description=description or
                         "voicecli Kokoro-82M TTS endpoint (SageMaker AI real-time, bidirectional streaming)")
        self.settings = settings

        self.image = ecr_assets.DockerImageAsset(
            self, "Image",
            directory=str(REPO_ROOT),
            file=DOCKERFILE,
            exclude=context_filter(),
            ignore_mode=IgnoreMode.DOCKER,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )

        self.role = self._execution_role()

        self.model = sagemaker.CfnModel(
            self, "Model",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=settings.network_isolation,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image.image_uri,
                mode="SingleModel",
                environment={
                    "VOICECLI_ENDPOINT__LOCAL__ENGINE": settings.engine,
                    "VOICECLI_ENDPOINT__LOCAL__WORKERS": settings.workers,
                    "VOICECLI_ENDPOINT__LOCAL__THREADS": settings.threads,
                },
            ),
        )
        # CreateModel checks that the role can pull the image: the role's policy must exist first.
        self.model.node.add_dependency(self.role)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self, "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=settings.instance_type,
                    initial_instance_count=settings.initial_instance_count,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=settings.health_check_timeout_s,
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=settings.routing_strategy,
                    ),
                    inference_ami_version=settings.inference_ami_version or None,
                )
            ],
        )

        # The config has no fixed name, so a changed setting creates a new config and updates the endpoint in
        # place (SageMaker's blue/green), while the endpoint keeps the name voicecli is configured with.
        self.endpoint = sagemaker.CfnEndpoint(
            self, "Endpoint",
            endpoint_name=settings.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )

        self.scaling = autoscaling.ScalableTarget(
            self, "ScalableTarget",
            service_namespace=autoscaling.ServiceNamespace.SAGEMAKER,
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=f"endpoint/{self.endpoint.attr_endpoint_name}/variant/{VARIANT_NAME}",
            min_capacity=settings.min_capacity,
            max_capacity=settings.max_capacity,
        )
        # Capacity is sessions, not invocations: one bidirectional stream is one request for as long as the session
        # is open, and a session needs real-time synthesis while it speaks. ConcurrentRequestsPerModel counts the
        # requests in flight (queued ones too) every 10 s; the target comes from the measured capacity model
        # (container/README.md, "Capacity model"; settings.sessions_per_instance_target).
        self.scaling.scale_to_track_metric(
            "ConcurrentSessionsPerInstance",
            predefined_metric=autoscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
            target_value=settings.sessions_per_instance_target,
            scale_in_cooldown=Duration.seconds(settings.scale_in_cooldown_s),
            scale_out_cooldown=Duration.seconds(settings.scale_out_cooldown_s),
        )

        CfnOutput(self, "EndpointName", value=self.endpoint.attr_endpoint_name,
                  description="voicecli config key endpoint.sagemaker.name")
        CfnOutput(self, "EndpointRegion", value=Aws.REGION,
                  description="voicecli config key endpoint.sagemaker.region")
        CfnOutput(self, "ImageUri", value=self.image.image_uri, description="The container image the model runs")

    def _execution_role(self) -> iam.Role:
        """Least privilege for a container that reads nothing from S3: pull its image, write its logs and metrics."""
        role = iam.Role(
            self, "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker execution role for the voicecli Kokoro endpoint",
        )
        self.image.repository.grant_pull(role)
        log_group = (f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:"
                     f"/aws/sagemaker/Endpoints/{self.settings.endpoint_name}")
        role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[log_group, f"{log_group}:*"],
        ))
        role.add_to_policy(iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],  # PutMetricData has no resource-level permissions
        ))
        return role
