// The JavaScript twin (see ../README.md): the same cluster, layer and checks as ../python/app.py.
const fs = require('fs');
const path = require('path');
const cdk = require('aws-cdk-lib');
const eks = require('aws-cdk-lib/aws-eks-v2');
const { KubectlV35Layer } = require('@aws-cdk/lambda-layer-kubectl-v35');
const { AwsSolutionsChecks } = require('cdk-nag');

const acks = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'acknowledgements.json'), 'utf8'));
const app = new cdk.App({ builtinCloudFormationValidation: false });
const stack = new cdk.Stack(app, 'Twin');
new eks.Cluster(stack, 'Cluster', {
  version: eks.KubernetesVersion.of('1.35'),
  kubectlProviderOptions: { kubectlLayer: new KubectlV35Layer(stack, 'Kubectl') },
});
cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
cdk.Validations.of(app).acknowledge(...acks.ids.map((id) => ({ id, reason: acks.reason })));
app.synth();
