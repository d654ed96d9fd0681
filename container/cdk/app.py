"""CDK app entry point: `cdk synth` / `cdk deploy` run this (cdk.json's "app"), from container/cdk/.

Settings come from CDK context: defaults in cdk.json, overrides with `-c voicecli:<key>=<value>` (container/README.md
lists them). The stack is environment-agnostic: the deploying profile decides account and region.
"""

from __future__ import annotations

import sys

from aws_cdk import App
from kokoro_stack import KokoroEndpointStack
from settings import EndpointSettings, SettingsError


def main() -> int:
    app = App()
    try:
        settings = EndpointSettings.from_context(app.node.try_get_context)
    except SettingsError as exc:
        print(f"voicecli cdk: {exc}", file=sys.stderr)
        return 2
    KokoroEndpointStack(app, settings.stack_name, settings=settings)
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
