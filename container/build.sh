#!/usr/bin/env bash
# Build voicecli's Kokoro endpoint image and, with --push, push it to Amazon ECR.
# `cdk deploy` (container/cdk) builds and pushes the image by itself; this script is for building or testing the
# image alone, for pushing it somewhere of your choosing, and for CI.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: container/build.sh [options]

Build the image from the repository root (the build context; container/Dockerfile.dockerignore filters it) and
optionally push it to an Amazon ECR private repository. Needs Docker with BuildKit (Docker 23+ has it by default);
--push also needs the AWS CLI v2 and credentials allowed to use ECR.

Options:
  -n, --name NAME         image and ECR repository name (default: voicecli-kokoro)
  -t, --tag TAG           image tag (default: the git commit, short; "latest" outside git)
      --platform P        target platform (default: linux/amd64, what SageMaker GPU instances run)
      --build-arg K=V     passed to docker build; repeatable (e.g. TORCH_INDEX_URL=..., TORCH_VERSION=...)
      --push              create the ECR repository if missing (scan on push), log in, tag and push
      --region REGION     ECR region (default: $AWS_REGION, $AWS_DEFAULT_REGION, then the profile's region)
      --profile PROFILE   AWS CLI profile for --push
      --account ID        AWS account id (default: from `aws sts get-caller-identity`)
      --dry-run           print the commands instead of running them (no Docker or AWS access needed)
  -h, --help              show this help

Examples:
  container/build.sh                                   # local image voicecli-kokoro:<commit>
  docker run --rm --gpus all -p 8080:8080 voicecli-kokoro:<commit>
  container/build.sh --push --region us-east-1         # prints the pushed image URI last
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

name=voicecli-kokoro
tag=""
platform=linux/amd64
push=false
region=""
profile=""
account=""
dry_run=false
build_args=()

need_value() {
    if [[ $# -lt 2 || -z "$2" ]]; then
        echo "build.sh: $1 needs a value (see --help)" >&2
        exit 64
    fi
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        -n|--name) need_value "$@"; name=$2; shift 2 ;;
        -t|--tag) need_value "$@"; tag=$2; shift 2 ;;
        --platform) need_value "$@"; platform=$2; shift 2 ;;
        --build-arg) need_value "$@"; build_args+=(--build-arg "$2"); shift 2 ;;
        --push) push=true; shift ;;
        --region) need_value "$@"; region=$2; shift 2 ;;
        --profile) need_value "$@"; profile=$2; shift 2 ;;
        --account) need_value "$@"; account=$2; shift 2 ;;
        --dry-run) dry_run=true; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done

if [[ -z "$tag" ]]; then
    tag=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo latest)
fi

# Print a command, shell-quoted, and run it unless this is a dry run.
run() {
    printf '+'
    printf ' %q' "$@"
    printf '\n'
    if [[ "$dry_run" == false ]]; then
        "$@"
    fi
}

aws_cli() {
    if [[ -n "$profile" ]]; then
        aws --profile "$profile" --region "$region" "$@"
    else
        aws --region "$region" "$@"
    fi
}

local_image="$name:$tag"
run env DOCKER_BUILDKIT=1 docker build \
    --platform "$platform" \
    --file "$root/container/Dockerfile" \
    --tag "$local_image" \
    ${build_args[@]+"${build_args[@]}"} \
    "$root"

if [[ "$push" == false ]]; then
    echo "built $local_image"
    exit 0
fi

if [[ -z "$region" ]]; then
    region=${AWS_REGION:-${AWS_DEFAULT_REGION:-}}
fi
if [[ -z "$region" && "$dry_run" == false ]]; then
    region=$(aws ${profile:+--profile "$profile"} configure get region || true)
fi
if [[ -z "$region" ]]; then
    echo "build.sh: no AWS region: pass --region or set AWS_REGION" >&2
    exit 64
fi
if [[ -z "$account" ]]; then
    if [[ "$dry_run" == true ]]; then
        account='<account>'
    else
        account=$(aws_cli sts get-caller-identity --query Account --output text)
    fi
fi

registry="$account.dkr.ecr.$region.amazonaws.com"
remote_image="$registry/$name:$tag"

printf '+ aws ecr describe-repositories --repository-names %s || aws ecr create-repository ...\n' "$name"
if [[ "$dry_run" == false ]] && ! aws_cli ecr describe-repositories --repository-names "$name" >/dev/null 2>&1; then
    aws_cli ecr create-repository --repository-name "$name" \
        --image-scanning-configuration scanOnPush=true --image-tag-mutability MUTABLE >/dev/null
fi
# The password goes through a pipe, never the command line or a file.
printf '+ aws ecr get-login-password | docker login --username AWS --password-stdin %s\n' "$registry"
if [[ "$dry_run" == false ]]; then
    aws_cli ecr get-login-password | docker login --username AWS --password-stdin "$registry"
fi
run docker tag "$local_image" "$remote_image"
run docker push "$remote_image"
echo "$remote_image"
