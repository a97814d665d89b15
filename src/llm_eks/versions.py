"""Every pinned upstream version in one place, so an upgrade is a one-line diff a reviewer can see.

No aws_cdk import here: the cdk8s charts read these too.
"""

from __future__ import annotations

# One Kubernetes minor drives the EKS control plane, the kubectl Lambda layer (aws-cdk.lambda-layer-kubectl-vNN,
# pinned in pyproject.toml), the node AMIs' Kubernetes variant and the schema version Kubernetes objects are
# validated against. Bump them together (docs: Upgrades).
KUBERNETES_MINOR = 35
KUBERNETES_VERSION = f"1.{KUBERNETES_MINOR}"

# Karpenter controller and karpenter-crd Helm charts (oci://public.ecr.aws/karpenter/{karpenter,karpenter-crd}),
# always the same version. Chart versions carry no leading "v": hack/release/release.sh publishes "${git_tag#v}";
# v1.14.1 docs pin KARPENTER_VERSION="1.14.1" and the IAM in tests/fixtures/upstream/karpenter-cloudformation.yaml.
KARPENTER_VERSION = "1.14.1"

# vLLM OpenAI-compatible server image (ENTRYPOINT ["vllm", "serve"], runs as root, ships user vllm UID 2000/GID 0),
# pinned by tag. v0.33.0 is the newest vllm release on PyPI (`pip index versions vllm`, 2026-11-29); the image is
# published as vllm/vllm-openai:v<version> (docker/Dockerfile target vllm-openai).
VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
# The Neuron engines' images: AWS's Neuron Deep Learning Containers for vLLM (public.ecr.aws/neuron/
# pytorch-inference-vllm-neuronx), one per Neuron engine path (llm_eks/catalog/neuron.py), pinned by tag.
# Inferentia2 and Trainium: vLLM 0.16.0 with vllm-neuron 0.5.3 and NxD Inference 0.10.18399, Neuron SDK 2.31.1
# (aws-neuron/deep-learning-containers README.md and vllm/inference/0.16.0/Dockerfile.neuronx at 2be9ed1d, 2026-08-17:
# trn1, trn2, trn3, inf2).
NEURON_NXDI_IMAGE = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04"
# Trainium2: vllm-neuron 0.29.0.1.2.0 (vLLM 0.29.0 with plugin 1.2.0), Neuron SDK 2.33.0 (the 2.33.0 component
# release notes). The tag follows the README's naming of the 0.21.0.1.0.0 and 0.24.0.1.1.0 images; no listing read
# here names it (docs: What is not verified), so `llm-eks images lock` resolving it is the first check.
NEURON_VLLM_IMAGE = (
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py313-sdk2.33.0-ubuntu24.04"
)
# The Neuron monitor's Prometheus exporter, as the Neuron SDK's Kubernetes manifest runs it
# (aws-neuron/aws-neuron-sdk src/k8/k8s-neuron-monitor-daemonset.yml at 81ce03ae: port 8000, privileged).
NEURON_MONITOR_IMAGE = "public.ecr.aws/neuron/neuron-monitor:1.3.0"
# The pause image of Kubernetes 1.35 (kubeadm's image list for v1.35): the placeholder pods of warm headroom run it.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"

# GPU node AMIs, pinned in the Karpenter EC2NodeClass alias (never `@latest`: every AWS release would drift and
# replace every GPU node). Bottlerocket 1.65.0: bottlerocket-os/bottlerocket PR #4928 (v1.65.0 changelog,
# 2026-09-03); EKS lists it as node AMI release 1.65.0-0be31b34 (aws-k8s-1.35-nvidia exists since v1.53.0).
BOTTLEROCKET_AMI_VERSION = "v1.65.0"
# AL2023 EKS-optimized AMI release (alias al2023@vYYYYMMDD, the awslabs/amazon-eks-ami release tag); EKS lists
# 1.35.7-20260903 for AL2023 alongside Bottlerocket 1.65.0-0be31b34.
AL2023_AMI_VERSION = "v20260903"

# NVIDIA device plugin Helm chart (https://nvidia.github.io/k8s-device-plugin, chart nvidia-device-plugin); 0.20.0 is
# the newest entry in the repo's gh-pages index.yaml (created 2026-08-20, tag v0.20.0).
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
# DCGM exporter Helm chart (https://nvidia.github.io/dcgm-exporter/helm-charts, chart dcgm-exporter); 4.8.2 (app
# 4.5.3-4.8.2) is the newest in the repo's gh-pages helm-charts/index.yaml (tag 4.5.3-4.8.2, 2026-05-06).
DCGM_EXPORTER_CHART_VERSION = "4.8.2"
# AWS Neuron Helm chart (oci://public.ecr.aws/neuron/neuron-helm-chart); 1.10.0 is the newest GitHub release of
# aws-neuron/neuron-helm-charts (2026-08-19; 1.9.0 = Neuron SDK 2.31.0).
NEURON_HELM_CHART_VERSION = "1.10.0"
# AWS EFA Kubernetes device plugin Helm chart (https://aws.github.io/eks-charts, chart aws-efa-k8s-device-plugin),
# advertising vpc.amazonaws.com/efa on the nodes of EFA pools: v0.5.30 (app v0.5.20, image
# 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20) is the chart at aws/eks-charts
# 5239609 (2026-08-03), last changed in bfe91c4 (2026-07-21, "add latest EFA instance types"). Its version carries
# the leading "v", as its Chart.yaml writes it.
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"

# --- Cluster add-on charts. Each confirmed in the chart's own source at the named tag/commit; the stored
# snapshots read were the newest available (Aug 2026 at the latest), so a newer patch may exist by deploy time.
# KEDA chart kedacore/keda: 2.20.2 ships KEDA v2.20.2, the version of the CRD schema the tests validate with
# (kedacore/charts keda/Chart.yaml at tag v2.20.2, 2026-07-31; newest release in the repo).
KEDA_CHART_VERSION = "2.20.2"
# kube-prometheus-stack: 88.3.0 is the last release on prometheus-operator v0.93.0, the version of the CRD schemas
# the tests validate with (prometheus-community/helm-charts tag kube-prometheus-stack-88.3.0, 2026-08-11; 88.4.0+
# move to v0.93.1).
KUBE_PROMETHEUS_STACK_CHART_VERSION = "88.3.0"
# Thanos, the Prometheus replicas' sidecars and the querier that deduplicates them (manifests/query_endpoint.py):
# v0.42.2 is prometheus-operator v0.93.0's default sidecar (pkg/operator/defaults.go DefaultThanosVersion), pinned
# here so both run the same release.
THANOS_IMAGE = "quay.io/thanos/thanos:v0.42.2"
# prometheus-operator-crds: 31.0.0 carries the v0.93.0 CRDs as templates, so `helm upgrade` upgrades them
# (prometheus-community/helm-charts tag prometheus-operator-crds-31.0.0, appVersion v0.93.0, 2026-07-28).
PROMETHEUS_OPERATOR_CRDS_CHART_VERSION = "31.0.0"
# kuberay-operator: 1.7.0 = KubeRay v1.7.0, the ray.io CRDs the tests validate with (ray-project/kuberay
# helm-chart/kuberay-operator/Chart.yaml at tag v1.7.0; newest tag in the repo, 2026-08).
KUBERAY_OPERATOR_CHART_VERSION = "1.7.0"
# LeaderWorkerSet (oci://registry.k8s.io/lws/charts/lws): 0.10.0 = LWS v0.10.0, the newest tag of
# kubernetes-sigs/lws (2026-08), as its installation guide pins it (site/content/en/docs/installation/_index.md).
# The release packages the chart at the tag's version and sets the manager image to registry.k8s.io/lws/lws:<tag>
# (hack/push-chart.sh); its crds/ holds leaderworkerset.x-k8s.io/v1.
LWS_CHART_VERSION = "0.10.0"
# secrets-store-csi-driver: 1.6.0 (kubernetes-sigs/secrets-store-csi-driver charts/ at tag v1.6.0, 2026-04-27);
# the same version the AWS provider chart 3.1.1 locks in its Chart.lock.
SECRETS_STORE_CSI_DRIVER_CHART_VERSION = "1.6.0"
# secrets-store-csi-driver-provider-aws (ASCP): 3.1.1, image tag 3.1.1, Pod Identity supported (aws/secrets-store-
# csi-driver-provider-aws charts/secrets-store-csi-driver-provider-aws/Chart.yaml at 5f47771, 2026-06-01).
SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION = "3.1.1"
# aws-load-balancer-controller: chart 3.5.0 = controller v3.5.0 (aws/eks-charts stable/aws-load-balancer-controller
# at 5239609, 2026-08-03; kubernetes-sigs/aws-load-balancer-controller tag v3.5.0 is the newest release tag).
AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION = "3.5.0"
# Envoy Gateway (oci://docker.io/envoyproxy/gateway-helm): v1.9.0 = envoyproxy/gateway tag v1.9.0 (39763b1, VERSION
# file); its release workflow pushes the chart as both `v1.9.0` and `1.9.0`, the controller image
# docker.io/envoyproxy/gateway:v1.9.0 (.github/workflows/release.yaml "Build and Push EG Release Helm Chart").
ENVOY_GATEWAY_VERSION = "v1.9.0"
# The data plane Envoy and the rate-limit service Envoy Gateway v1.9.0 runs by default
# (api/v1alpha1/shared_types.go DefaultEnvoyProxyImage, DefaultRateLimitImage; the chart's values.tmpl.yaml
# `global.images.ratelimit.image`).
ENVOY_PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.39.0"
RATELIMIT_IMAGE = "docker.io/envoyproxy/ratelimit:17b1956c"
# Envoy AI Gateway (oci://docker.io/envoyproxy/ai-gateway-helm): v1.1.0 = envoyproxy/ai-gateway tag v1.1.0 (c217da8);
# the chart's images default to the app version, docker.io/envoyproxy/ai-gateway-{controller,extproc}:v1.1.0
# (manifests/charts/ai-gateway-helm/values.yaml, Makefile helm-package --app-version).
AI_GATEWAY_VERSION = "v1.1.0"
# External Secrets Operator (https://charts.external-secrets.io, chart external-secrets): 2.9.0, app v2.9.0
# (external-secrets/external-secrets tag helm-chart-2.9.0, cc5bfbc: deploy/charts/external-secrets/Chart.yaml).
EXTERNAL_SECRETS_CHART_VERSION = "2.9.0"
# The rate-limit counters' store: Valkey 9.1.1, the version valkey-io/valkey-helm's chart 0.11.0 runs (valkey/Chart.yaml
# appVersion at dbcf6a6; image docker.io/valkey/valkey, values.yaml). llm-eks renders its own objects (manifests/
# gateway/counter_store.py), not that chart.
VALKEY_IMAGE = "docker.io/valkey/valkey:9.1.1"

# Ray (KubeRay RayService rayVersion) and the Ray Serve LLM image. 2.60.0 is the newest ray on PyPI
# (`pip index versions ray`, 2026-11-29); its wheel's ray[llm] extra pins vllm[audio]==0.29.0. ray-llm images are
# built from the rayllm_py312_cu130 lock (docker/ray-llm/cuda.wanda.yaml) and tagged <ray>-py312-cu130, as the
# published 2.58.0-py312-cu130 is.
RAY_VERSION = "2.60.0"
RAY_LLM_IMAGE = f"rayproject/ray-llm:{RAY_VERSION}-py312-cu130"

# Gateway API standard-channel CRDs, installed by PinnedCrds from kubernetes-sigs/gateway-api tag v1.6.1 (8bb74df).
GATEWAY_API_VERSION = "v1.6.1"
# Gateway API Inference Extension InferencePool CRD (inference.networking.k8s.io/v1), tag v1.6.0 (992e5c2).
GAIE_VERSION = "v1.6.0"

# The inference gateway's routers, pulled by the gateway's pods (manifests/gateway):
# llm-d/llm-d-router v0.10.0 (71f4f09), the endpoint picker (its hack/push-chart.sh writes this repository and tag;
# .github/workflows/ci-release.yaml builds it from the tag).
LLMD_VERSION = "v0.10.0"
EPP_IMAGE = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:{LLMD_VERSION}"
# The llm-d router's routing sidecar on the decode pods of a disaggregated workload (Makefile SIDECAR_IMAGE_NAME, from
# Dockerfile.sidecar, built by the same release workflow).
DISAGG_SIDECAR_IMAGE = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{LLMD_VERSION}"
