import { App, Tags, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readDeploymentConfig } from './config.js';
import { acknowledgeFindings } from './nag.js';
import { StatefulStack } from './stateful-stack.js';
import { StatelessStack } from './stateless-stack.js';

/** Builds the Capstan app: data in one stack, compute in another, checked by cdk-nag. */
export function buildApp(app: App = new App()): {
  app: App;
  stateful: StatefulStack;
  stateless: StatelessStack;
} {
  const config = readDeploymentConfig(app);
  // Environment-agnostic stacks: the account and region come from the deploying credentials.
  const stateful = new StatefulStack(app, `${titleCase(config.prefix)}Stateful`, { config });
  const stateless = new StatelessStack(app, `${titleCase(config.prefix)}Stateless`, { config, stateful });
  Tags.of(app).add('application', config.prefix);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  acknowledgeFindings(config, stateful, stateless);
  return { app, stateful, stateless };
}

function titleCase(text: string): string {
  return text.replace(/(^|-)([a-z])/g, (_m, _dash, c: string) => c.toUpperCase());
}

if (import.meta.url === `file://${process.argv[1]}`) {
  buildApp().app.synth();
}
