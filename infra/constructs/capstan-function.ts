import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Architecture, LoggingFormat, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface CapstanFunctionProps {
  /** Handler module, relative to the repository root, e.g. `functions/api/health.ts`. */
  readonly entry: string;
  /** Environment for the handler; the common variables are added by the construct. */
  readonly environment?: Readonly<Record<string, string>>;
  /** @default Duration.seconds(29) */
  readonly timeout?: Duration;
  /** @default 512 */
  readonly memorySize?: number;
  /** Key that encrypts the function's log group. */
  readonly logKey?: IKey;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** Where Lambda keeps asynchronous invocations that failed every retry. @default none */
  readonly deadLetterQueue?: IQueue;
}

/**
 * Every Capstan Lambda function: Node.js 24 on arm64, active tracing, JSON logs in a
 * retained log group, and an ESM bundle built by the local esbuild (no Docker).
 */
export class CapstanFunction extends Construct {
  public readonly function: NodejsFunction;
  public readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: CapstanFunctionProps) {
    super(scope, id);
    if (!/^functions\/.+\.ts$/.test(props.entry)) {
      throw new Error(`CapstanFunction entry must be a .ts file under functions/, got '${props.entry}'`);
    }
    this.logGroup = new LogGroup(this, 'Logs', {
      retention: props.logRetention ?? RetentionDays.ONE_MONTH,
      encryptionKey: props.logKey,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.function = new NodejsFunction(this, 'Function', {
      entry: `${REPO_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}package-lock.json`,
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      tracing: Tracing.ACTIVE,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(29),
      logGroup: this.logGroup,
      ...(props.deadLetterQueue && { deadLetterQueue: props.deadLetterQueue }),
      loggingFormat: LoggingFormat.JSON,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_SERVICE_NAME: 'capstan',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node24',
        minify: true,
        sourceMap: true,
        mainFields: ['module', 'main'],
        // ESM bundles of CommonJS dependencies still call require().
        banner: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
        forceDockerBundling: false,
      },
    });
  }
}
