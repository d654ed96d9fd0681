"""The CDK app synthesizes the endpoint the container contract needs, and context overrides change it.

Synthesis runs offline (no credentials, no Docker): the image asset is staged, not built. Needs aws-cdk-lib and
constructs (the `deploy` extra); skipped without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
cdk = pytest.importorskip("aws_cdk")
from aws_cdk.assertions import Match, Template  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CDK_DIR = ROOT / "container" / "cdk"
sys.path.insert(0, str(CDK_DIR))

from kokoro_stack import VARIANT_NAME, KokoroEndpointStack  # noqa: E402
from settings import PREFIX, EndpointSettings, SettingsError  # noqa: E402


def synth(tmp: Path, context: Mapping[str, Any] | None = None) -> tuple[Template, KokoroEndpointStack, Path]:
    """One stack synthesized into `tmp` with explicit context (cdk.json is read only by the CLI)."""
    app = cdk.App(context={PREFIX + k: v for k, v in (context or {}).items()}, outdir=str(tmp))
    settings = EndpointSettings.from_context(app.node.try_get_context)
    stack = KokoroEndpointStack(app, settings.stack_name, settings=settings)
    app.synth()
    return Template.from_stack(stack), stack, tmp


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, KokoroEndpointStack, Path]:
    return synth(tmp_path_factory.mktemp("cdk-default"))


def variant(template: Template) -> dict[str, Any]:
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    (production,) = config["Properties"]["ProductionVariants"]
    return dict(production)


def test_default_variant(default: tuple[Template, KokoroEndpointStack, Path]) -> None:
    template, _, _ = default
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)
    production = variant(template)
    assert production["VariantName"] == "primary" == VARIANT_NAME
    assert production["InstanceType"] == "ml.g5.xlarge"
    assert production["InitialInstanceCount"] == 1
    assert production["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
    assert production["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert production["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    assert production["ModelName"] == {"Fn::GetAtt": [Match.any_value(), "ModelName"]} or "Fn::GetAtt" in str(
        production["ModelName"])


def test_endpoint_name_and_output(default: tuple[Template, KokoroEndpointStack, Path]) -> None:
    template, _, _ = default
    template.has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "voicecli-kokoro"})
    outputs = template.find_outputs("EndpointName")
    assert outputs["EndpointName"]["Value"] == {"Fn::GetAtt": ["Endpoint", "EndpointName"]}


def test_model_runs_the_staged_image_asset(default: tuple[Template, KokoroEndpointStack, Path]) -> None:
    template, stack, outdir = default
    (model,) = template.find_resources("AWS::SageMaker::Model").values()
    container = model["Properties"]["PrimaryContainer"]
    image = json.dumps(container["Image"])
    asset_hash = stack.image.asset_hash
    assert "container-assets" in image and asset_hash in image
    assert container["Environment"] == {"VOICECLI_ENDPOINT__LOCAL__ENGINE": "auto",
                                        "VOICECLI_ENDPOINT__LOCAL__WORKERS": "auto",
                                        "VOICECLI_ENDPOINT__LOCAL__THREADS": "auto"}
    assert model["Properties"]["EnableNetworkIsolation"] is True
    manifest = json.loads((outdir / f"{stack.stack_name}.assets.json").read_text(encoding="utf-8"))
    source = manifest["dockerImages"][asset_hash]["source"]
    assert source["dockerFile"] == "container/Dockerfile"
    assert source["platform"] == "linux/amd64"


def test_execution_role_is_least_privilege(default: tuple[Template, KokoroEndpointStack, Path]) -> None:
    template, _, _ = default
    template.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": {"Statement": [Match.object_like(
            {"Principal": {"Service": "sagemaker.amazonaws.com"}})]},
    })
    roles = template.find_resources("AWS::IAM::Role")
    assert not any("ManagedPolicyArns" in r["Properties"] for r in roles.values())
    policies = json.dumps(template.find_resources("AWS::IAM::Policy"))
    for action in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:GetAuthorizationToken",
                   "logs:PutLogEvents", "cloudwatch:PutMetricData"):
        assert action in policies
    assert "/aws/sagemaker/Endpoints/voicecli-kokoro" in policies
    assert '"s3:' not in policies and '"sagemaker:*"' not in policies


def test_autoscaling_target_and_policy(default: tuple[Template, KokoroEndpointStack, Path]) -> None:
    template, _, _ = default
    (target,) = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    properties = target["Properties"]
    assert (properties["MinCapacity"], properties["MaxCapacity"]) == (1, 4)
    assert properties["ServiceNamespace"] == "sagemaker"
    assert properties["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    resource_id = json.dumps(properties["ResourceId"])
    assert "endpoint/" in resource_id and "/variant/primary" in resource_id and "EndpointName" in resource_id
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"},
            "TargetValue": 10,  # floor(14.5x real time per instance x 0.7 utilisation): the capacity model
            "ScaleInCooldown": 300,
            "ScaleOutCooldown": 60,
        },
    })


@pytest.mark.slow  # a CDK synth of its own: the jsii Node.js runtime, ~8 s (the `default` fixture's are slow too)
def test_context_overrides_change_the_stack(tmp_path: Path) -> None:
    # strings, as `cdk deploy -c key=value` delivers them
    template, _, _ = synth(tmp_path, {
        "endpointName": "kokoro-test", "instanceType": "ml.g6.xlarge", "initialInstanceCount": "2",
        "healthCheckTimeoutSeconds": "900", "routingStrategy": "RANDOM", "inferenceAmiVersion": "",
        "minCapacity": "2", "maxCapacity": "8", "audioRatePerInstance": "40", "targetUtilization": "0.5",
        "engine": "onnx", "workers": "4", "threads": "1", "networkIsolation": "false",
    })
    production = variant(template)
    assert production["InstanceType"] == "ml.g6.xlarge"
    assert production["InitialInstanceCount"] == 2
    assert production["ContainerStartupHealthCheckTimeoutInSeconds"] == 900
    assert production["RoutingConfig"] == {"RoutingStrategy": "RANDOM"}
    assert "InferenceAmiVersion" not in production
    template.has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "kokoro-test"})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget",
                                     {"MinCapacity": 2, "MaxCapacity": 8})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "TargetTrackingScalingPolicyConfiguration": Match.object_like({"TargetValue": 20})})
    template.has_resource_properties("AWS::SageMaker::Model", {
        "EnableNetworkIsolation": False,
        "PrimaryContainer": Match.object_like({"Environment": {
            "VOICECLI_ENDPOINT__LOCAL__ENGINE": "onnx", "VOICECLI_ENDPOINT__LOCAL__WORKERS": "4",
            "VOICECLI_ENDPOINT__LOCAL__THREADS": "1"}}),
    })


@pytest.mark.parametrize(("context", "message"), [
    ({"minCapacity": 5, "maxCapacity": 4}, "maxCapacity"),
    ({"initialInstanceCount": 6}, "outside the autoscaling range"),
    ({"endpointName": "-bad_name"}, "endpointName"),
    ({"instanceType": "g5.xlarge"}, "ml.*"),
    ({"healthCheckTimeoutSeconds": "10"}, "60..3600"),
    ({"maxCapacity": "four"}, "whole number"),
    ({"audioRatePerInstance": "0"}, "above 0"),
    ({"targetUtilization": "1.5"}, "targetUtilization"),
    ({"threads": "many"}, "auto or a whole number"),
    ({"routingStrategy": "ROUND_ROBIN"}, "LEAST_OUTSTANDING_REQUESTS"),
    ({"networkIsolation": "perhaps"}, "true or false"),
])
def test_invalid_context_fails_at_synth_with_the_key_to_fix(context: dict[str, Any], message: str) -> None:
    values = {PREFIX + k: v for k, v in context.items()}
    with pytest.raises(SettingsError, match=message) as raised:
        EndpointSettings.from_context(values.get)
    assert PREFIX in str(raised.value)


def test_cdk_json_defaults_are_the_settings_defaults() -> None:
    context = json.loads((CDK_DIR / "cdk.json").read_text(encoding="utf-8"))["context"]
    assert {k for k in context if k.startswith(PREFIX)} == {k for k in context}
    assert EndpointSettings.from_context(context.get) == EndpointSettings()


def test_staged_context_is_filtered_and_builds_the_project(default: tuple[Template, KokoroEndpointStack, Path],
                                                           tmp_path: Path) -> None:
    _, stack, outdir = default
    staged = outdir / f"asset.{stack.image.asset_hash}"
    names = {p.relative_to(staged).as_posix() for p in staged.rglob("*")}
    for needed in ("container/Dockerfile", "container/Dockerfile.dockerignore", "container/entrypoint.sh",
                   "requirements/endpoint.lock", "container/voicecli_endpoint/__init__.py",
                   "pyproject.toml", "voicecli/__init__.py"):
        assert needed in names
    top = {n.split("/")[0] for n in names}
    assert top <= {"container", "voicecli", "config", "requirements", "pyproject.toml", "README.md"}, top
    assert "requirements/ci.lock" not in names, "only the image's own lock belongs in its context"
    assert not any("__pycache__" in n or n.startswith("container/cdk") for n in names)
    # what `pip install --no-deps /tmp/src` does in the Dockerfile, on the staged copy
    source = tmp_path / "src"
    shutil.copytree(staged, source)
    wheels = tmp_path / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
         str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = wheels.glob("voicecli-*.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    assert "voicecli_endpoint/__init__.py" in members and "voicecli/models/install.py" in members
    assert "voicecli/default.toml" in members, "the config schema the CLI loads must be in the wheel"


@pytest.mark.slow
def test_app_entry_point_synthesizes_and_reports_bad_settings(tmp_path: Path) -> None:
    """app.py as the CDK CLI runs it (context and outdir through the CLI's environment variables)."""
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"),
           "CDK_CONTEXT_JSON": json.dumps({PREFIX + "maxCapacity": "6", PREFIX + "stackName": "KokoroAppTest"})}
    result = subprocess.run([sys.executable, "app.py"], cwd=CDK_DIR, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    template = json.loads((tmp_path / "out" / "KokoroAppTest.template.json").read_text(encoding="utf-8"))
    (target,) = (r for r in template["Resources"].values()
                 if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["MaxCapacity"] == 6
    env["CDK_CONTEXT_JSON"] = json.dumps({PREFIX + "minCapacity": "9"})
    bad = subprocess.run([sys.executable, "app.py"], cwd=CDK_DIR, env=env, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and f"{PREFIX}minCapacity" in bad.stderr
