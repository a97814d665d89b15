"""The Python twin (see ../README.md): one aws-eks-v2 cluster with the kubectl v35 layer, cdk-nag on."""

import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from cdk_nag import AwsSolutionsChecks

ACKS = json.loads((Path(__file__).parent.parent / "acknowledgements.json").read_text())

app = cdk.App(builtin_cloud_formation_validation=False)
stack = cdk.Stack(app, "Twin")
eks.Cluster(
    stack,
    "Cluster",
    version=eks.KubernetesVersion.of("1.35"),
    kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
cdk.Validations.of(app).acknowledge(*(cdk.Acknowledgment(id=i, reason=ACKS["reason"]) for i in ACKS["ids"]))
app.synth()
