"""The images of the Helm releases llm-eks installs, and how a locked digest goes into each chart's values.

Each entry was read in the chart's own values.yaml and templates at the pinned version (November 2026):

- karpenter 1.14.1, controller: `controller.image.digest` (`sha256:...`). The published chart already carries
  the release's digest (its hack/release/common.sh writes tag and digest into values.yaml); the lock overrides it.
- kube-prometheus-stack 88.3.0: prometheus-operator, prometheus-config-reloader (tags default to the appVersion,
  v0.93.0), kube-webhook-certgen (the admission-webhook patch Jobs), prometheus, alertmanager: `*.image.sha`, the
  hex alone (its templates add `@sha256:`). Its subcharts: grafana 12.10.4 (grafana-community) grafana and
  k8s-sidecar, `grafana.image.sha` and `grafana.sidecar.image.sha` (hex alone); kube-state-metrics 8.2.0,
  `kube-state-metrics.image.sha` (`sha256:...`: that template prints `@%s`); prometheus-node-exporter 4.56.1,
  the distroless variant kube-prometheus-stack selects, `prometheus-node-exporter.image.digest` (`sha256:...`).
- secrets-store-csi-driver 1.6.0: driver, node-driver-registrar, livenessprobe: `linux.*.digest` (`sha256:...`;
  the chart then renders `repo@digest`, without the tag); driver-crds (upgrade hook Jobs) has no digest value:
  `linux.crds.image.tag` = `v1.6.0@sha256:...`.
- No digest value at all, so `image.tag` = `<tag>@sha256:...`: keda 2.20.2 (operator, metrics API server,
  admission webhooks: `image.<part>.tag`), kuberay-operator 1.7.0, lws 0.10.0 (`image.manager.tag`),
  secrets-store-csi-driver-provider-aws 3.1.1, aws-load-balancer-controller 3.5.0, dcgm-exporter 4.8.2 (its
  distroless tag), nvidia-device-plugin 0.20.0 (installed by GpuDeviceSoftware for AL2023 nodes only, so
  llm-eks's Bottlerocket stacks never run it).
- gateway-helm v1.9.0 (Envoy Gateway): the controller (`global.images.envoyGateway.image`, also the Envoy pods'
  shutdown-manager through the chart's envoy-gateway-config) and the rate-limit service
  (`global.images.ratelimit.image`), each a whole reference: templates/_helpers.tpl splits it at the first "/" and
  the first ":" and prints `registry/repository:rest`, so `tag@sha256:...` survives. The data plane's Envoy image is
  set by llm-eks's own EnvoyProxy object, not the chart (manifests/gateway).
- ai-gateway-helm v1.1.0: the controller and the external processor it injects into Envoy pods:
  `controller.image.tag` and `extProc.image.tag` (`repository:tag` in templates/deployment.yaml, the extproc one
  passed as `--extProcImage`).
- external-secrets 2.9.0: `image.tag` (templates/_helpers.tpl `external-secrets.image`: `repository:tag`).

`tag@digest` in a tag value is used only where the chart renders that value solely as `repository:tag` in image
fields (checked in each chart's templates: no label or selector reads it), so the pod gets a valid
`repo:tag@sha256:...` reference.

Not covered, and why:
- prometheus-operator-crds and karpenter-crd: CRDs only, no images.
- neuron-helm-chart 1.10.0: its values at that version were not available to check here; the Neuron device plugin
  image stays on the chart's tag (Inferentia environments only).
- aws-efa-k8s-device-plugin v0.5.30: its image is in EKS's own ECR (602401143452.dkr.ecr.us-west-2.amazonaws.com),
  which answers AWS-signed requests only; the lock asks registries anonymously, so the plugin stays on its tag
  (EFA environments only).
- Images the charts run only in optional parts llm-eks leaves off (kube-prometheus-stack's admission-webhook
  Deployment and Thanos Ruler, Grafana's init-chown, image renderer and test pod, kube-rbac-proxy sidecars).
A chart installed at another version than the pinned one gets no digest values (its images differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llm_eks.versions import (
    AI_GATEWAY_VERSION,
    AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION,
    DCGM_EXPORTER_CHART_VERSION,
    ENVOY_GATEWAY_VERSION,
    EXTERNAL_SECRETS_CHART_VERSION,
    KARPENTER_VERSION,
    KEDA_CHART_VERSION,
    KUBE_PROMETHEUS_STACK_CHART_VERSION,
    KUBERAY_OPERATOR_CHART_VERSION,
    LWS_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
    RATELIMIT_IMAGE,
    SECRETS_STORE_CSI_DRIVER_CHART_VERSION,
    SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION,
    THANOS_IMAGE,
)

# CDK context key holding {reference: digest}; llm-eks's app sets it from the lock file, your app may set it too.
IMAGE_DIGESTS_CONTEXT = "llm-eks:image-digests"

# digest: the value is `sha256:<hex>`; sha: the chart wants the hex alone; tag: `<tag>@sha256:<hex>` in the tag field;
# ref: the whole `repo:tag@sha256:<hex>` where the chart takes a full reference.
Style = Literal["digest", "sha", "tag", "ref"]


@dataclass(frozen=True)
class ChartImage:
    """One image a chart runs at its pinned version, and the values path that takes its digest."""

    ref: str
    path: tuple[str, ...]
    style: Style

    def value(self, digest: str) -> str:
        if self.style == "sha":
            return digest.removeprefix("sha256:")
        if self.style == "tag":
            return f"{self.ref.rpartition(':')[2]}@{digest}"
        if self.style == "ref":
            return f"{self.ref}@{digest}"
        return digest


@dataclass(frozen=True)
class ChartImages:
    version: str
    images: tuple[ChartImage, ...]


def _img(ref: str, path: str, style: Style) -> ChartImage:
    return ChartImage(ref, tuple(path.split(".")), style)


_KPS = "quay.io/prometheus-operator"
CHART_IMAGES: Mapping[str, ChartImages] = {
    "karpenter": ChartImages(
        KARPENTER_VERSION,
        (_img(f"public.ecr.aws/karpenter/controller:{KARPENTER_VERSION}", "controller.image.digest", "digest"),),
    ),
    "kube-prometheus-stack": ChartImages(
        KUBE_PROMETHEUS_STACK_CHART_VERSION,
        (
            # Tags left empty in values.yaml default to the chart's appVersion, v0.93.0.
            _img(f"{_KPS}/prometheus-operator:v0.93.0", "prometheusOperator.image.sha", "sha"),
            _img(
                f"{_KPS}/prometheus-config-reloader:v0.93.0",
                "prometheusOperator.prometheusConfigReloader.image.sha",
                "sha",
            ),
            _img(
                "ghcr.io/jkroepke/kube-webhook-certgen:1.8.5",
                "prometheusOperator.admissionWebhooks.patch.image.sha",
                "sha",
            ),
            _img("quay.io/prometheus/prometheus:v3.13.2-distroless", "prometheus.prometheusSpec.image.sha", "sha"),
            _img("quay.io/prometheus/alertmanager:v0.33.1", "alertmanager.alertmanagerSpec.image.sha", "sha"),
            # The Thanos sidecar (llm-eks turns it on): the operator takes a whole reference in `thanos.image`.
            _img(THANOS_IMAGE, "prometheus.prometheusSpec.thanos.image", "ref"),
            _img("docker.io/grafana/grafana:13.1.3", "grafana.image.sha", "sha"),
            _img("quay.io/kiwigrid/k8s-sidecar:2.10.1", "grafana.sidecar.image.sha", "sha"),
            _img(
                "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.19.1",
                "kube-state-metrics.image.sha",
                "digest",
            ),
            _img(
                "quay.io/prometheus/node-exporter:v1.12.1-distroless", "prometheus-node-exporter.image.digest", "digest"
            ),
        ),
    ),
    "keda": ChartImages(
        KEDA_CHART_VERSION,
        tuple(
            _img(f"ghcr.io/kedacore/{name}:{KEDA_CHART_VERSION}", f"image.{part}.tag", "tag")
            for name, part in (
                ("keda", "keda"),
                ("keda-metrics-apiserver", "metricsApiServer"),
                ("keda-admission-webhooks", "webhooks"),
            )
        ),
    ),
    "lws": ChartImages(
        LWS_CHART_VERSION,
        (_img(f"registry.k8s.io/lws/lws:v{LWS_CHART_VERSION}", "image.manager.tag", "tag"),),
    ),
    "kuberay-operator": ChartImages(
        KUBERAY_OPERATOR_CHART_VERSION,
        (_img(f"quay.io/kuberay/operator:v{KUBERAY_OPERATOR_CHART_VERSION}", "image.tag", "tag"),),
    ),
    "secrets-store-csi-driver": ChartImages(
        SECRETS_STORE_CSI_DRIVER_CHART_VERSION,
        (
            _img(
                f"registry.k8s.io/csi-secrets-store/driver:v{SECRETS_STORE_CSI_DRIVER_CHART_VERSION}",
                "linux.image.digest",
                "digest",
            ),
            _img(
                f"registry.k8s.io/csi-secrets-store/driver-crds:v{SECRETS_STORE_CSI_DRIVER_CHART_VERSION}",
                "linux.crds.image.tag",
                "tag",
            ),
            _img(
                "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.16.0", "linux.registrarImage.digest", "digest"
            ),
            _img("registry.k8s.io/sig-storage/livenessprobe:v2.18.0", "linux.livenessProbeImage.digest", "digest"),
        ),
    ),
    "secrets-store-csi-driver-provider-aws": ChartImages(
        SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION,
        (
            _img(
                "public.ecr.aws/aws-secrets-manager/secrets-store-csi-driver-provider-aws:"
                f"{SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION}",
                "image.tag",
                "tag",
            ),
        ),
    ),
    "aws-load-balancer-controller": ChartImages(
        AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION,
        (
            _img(
                f"public.ecr.aws/eks/aws-load-balancer-controller:v{AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION}",
                "image.tag",
                "tag",
            ),
        ),
    ),
    "gateway-helm": ChartImages(
        ENVOY_GATEWAY_VERSION,
        (
            _img(f"docker.io/envoyproxy/gateway:{ENVOY_GATEWAY_VERSION}", "global.images.envoyGateway.image", "ref"),
            _img(RATELIMIT_IMAGE, "global.images.ratelimit.image", "ref"),
        ),
    ),
    "ai-gateway-helm": ChartImages(
        AI_GATEWAY_VERSION,
        (
            _img(f"docker.io/envoyproxy/ai-gateway-controller:{AI_GATEWAY_VERSION}", "controller.image.tag", "tag"),
            _img(f"docker.io/envoyproxy/ai-gateway-extproc:{AI_GATEWAY_VERSION}", "extProc.image.tag", "tag"),
        ),
    ),
    "external-secrets": ChartImages(
        EXTERNAL_SECRETS_CHART_VERSION,
        (_img(f"ghcr.io/external-secrets/external-secrets:v{EXTERNAL_SECRETS_CHART_VERSION}", "image.tag", "tag"),),
    ),
    "dcgm-exporter": ChartImages(
        DCGM_EXPORTER_CHART_VERSION,
        (_img("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless", "image.tag", "tag"),),
    ),
    "nvidia-device-plugin": ChartImages(
        NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        # The tag defaults to v<appVersion>; the device plugin, GFD and MPS DaemonSets all run this one image.
        (_img(f"nvcr.io/nvidia/k8s-device-plugin:v{NVIDIA_DEVICE_PLUGIN_CHART_VERSION}", "image.tag", "tag"),),
    ),
}

# Charts llm-eks installs whose images the lock does not cover (see the module docstring).
NOT_COVERED: Mapping[str, str] = {
    "karpenter-crd": "CRDs only, no images",
    "prometheus-operator-crds": "CRDs only, no images",
    "neuron-helm-chart": "values at the pinned version not verified; the device plugin stays on the chart's tag",
    # Its image is in EKS's own ECR (602401143452.dkr.ecr.us-west-2.amazonaws.com), which answers only AWS-signed
    # requests; `llm-eks images lock` asks registries anonymously.
    "aws-efa-k8s-device-plugin": "its image is in EKS's ECR, which needs AWS credentials the lock does not use",
}


def chart_images(chart: str, version: str) -> tuple[ChartImage, ...]:
    """The images `chart` runs at `version`, when that is the version llm-eks pins (else nothing is known)."""
    known = CHART_IMAGES.get(chart)
    return known.images if known is not None and known.version == version else ()


def digest_values(chart: str, version: str, digests: Mapping[str, str]) -> dict[str, Any]:
    """Helm values that pin every locked image of `chart` at `version` by digest ({} when none is locked)."""
    values: dict[str, Any] = {}
    for image in chart_images(chart, version):
        digest = digests.get(image.ref)
        if digest is None:
            continue
        node = values
        for key in image.path[:-1]:
            node = node.setdefault(key, {})
        node[image.path[-1]] = image.value(digest)
    return values


def merge_values(base: Mapping[str, Any] | None, overlay: Mapping[str, Any]) -> dict[str, Any] | None:
    """`base` with `overlay` merged in, the way Helm merges values files (maps recursively, the rest replaced).

    None stays None when there is nothing to add, so a chart installed without values stays that way."""
    if not overlay:
        return None if base is None else dict(base)
    merged = dict(base or {})
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged
