import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type { RestApi as ApiGatewayRestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  HeadersFrameOption,
  HeadersReferrerPolicy,
  OriginRequestPolicy,
  ResponseHeadersPolicy,
  ViewerProtocolPolicy,
} from 'aws-cdk-lib/aws-cloudfront';
import { RestApiOrigin, S3BucketOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import { BucketDeployment, Source } from 'aws-cdk-lib/aws-s3-deployment';
import { Construct } from 'constructs';
import { acknowledge, wildcardResource } from '../nag.js';

export interface ConsoleProps {
  /** The built console (`console/dist`: `npm run console:build`, or `ensureConsoleBuilt()`). */
  readonly assetDir: string;
  /** The REST API; CloudFront serves it under `/v1/*` on the console's origin, so no CORS is needed. */
  readonly restApi: ApiGatewayRestApi;
  /** The WebSocket API's stage URL (`wss://...`). */
  readonly webSocketUrl: string;
  /** The OIDC issuer the console signs in with (authorization code + PKCE). */
  readonly issuer: string;
  /** The console's OIDC client id at the issuer (a public client: no secret). */
  readonly clientId: string;
  /**
   * The OIDC scopes asked for.
   * @default 'openid'
   */
  readonly scope?: string;
}

/**
 * The operator console in AWS: its static files in a private S3 bucket read only by CloudFront
 * (origin access control), security headers on every answer, the REST API under `/v1/*` on the
 * same origin, and a `config.json` written at deploy with the API and WebSocket URLs.
 */
export class Console extends Construct {
  public readonly bucket: Bucket;
  public readonly distribution: Distribution;
  /** `https://<distribution domain>`. */
  public readonly url: string;

  constructor(scope: Construct, id: string, props: ConsoleProps) {
    super(scope, id);
    if (!props.webSocketUrl) throw new Error('Console: webSocketUrl is required');
    if (!props.clientId) throw new Error('Console: clientId is required');

    this.bucket = new Bucket(this, 'Files', {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.DESTROY,
      autoDeleteObjects: true,
    });
    const headers = new ResponseHeadersPolicy(this, 'SecurityHeaders', {
      securityHeadersBehavior: {
        contentSecurityPolicy: {
          contentSecurityPolicy: [
            "default-src 'self'",
            `connect-src 'self' ${props.webSocketUrl} ${props.issuer}`,
            "img-src 'self' data:",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
          ].join('; '),
          override: true,
        },
        strictTransportSecurity: { accessControlMaxAge: Duration.days(365), includeSubdomains: true, override: true },
        contentTypeOptions: { override: true },
        frameOptions: { frameOption: HeadersFrameOption.DENY, override: true },
        referrerPolicy: { referrerPolicy: HeadersReferrerPolicy.NO_REFERRER, override: true },
        xssProtection: { protection: true, modeBlock: true, override: true },
      },
    });
    this.distribution = new Distribution(this, 'Distribution', {
      comment: 'Capstan operator console',
      defaultRootObject: 'index.html',
      defaultBehavior: {
        origin: S3BucketOrigin.withOriginAccessControl(this.bucket),
        viewerProtocolPolicy: ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
        responseHeadersPolicy: headers,
        cachePolicy: CachePolicy.CACHING_OPTIMIZED,
      },
      additionalBehaviors: {
        '/v1/*': {
          origin: new RestApiOrigin(props.restApi),
          viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
          allowedMethods: AllowedMethods.ALLOW_ALL,
          cachePolicy: CachePolicy.CACHING_DISABLED,
          originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
          responseHeadersPolicy: headers,
        },
      },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;

    // Prebuilt files plus a JSON file of deploy-time values: no bundling, so synth needs no Docker.
    new BucketDeployment(this, 'Deploy', {
      destinationBucket: this.bucket,
      sources: [
        Source.asset(props.assetDir),
        Source.jsonData('config.json', {
          apiUrl: '/v1',
          wsUrl: props.webSocketUrl,
          auth: { mode: 'oidc', issuer: props.issuer, clientId: props.clientId, scope: props.scope ?? 'openid' },
        }),
      ],
      distribution: this.distribution,
      distributionPaths: ['/index.html', '/config.json', '/app.js', '/app.css'],
      memoryLimit: 256,
    });

    // BucketDeployment's function is a singleton at the stack's root, shared by every deployment.
    const stack = Stack.of(this);
    for (const handler of stack.node.children.filter((c) => c.node.id.startsWith('Custom::CDKBucketDeployment'))) {
      acknowledge(
        handler,
        "aws-cdk-lib's BucketDeployment function: aws-cdk-lib picks its runtime, and it runs only at deploy.",
        ['AwsSolutions-L1'],
      );
      acknowledge(
        handler,
        'BucketDeployment copies every object of the staged asset into the console bucket, so it reads and writes by prefix.',
        [
          wildcardResource(this, `${this.bucket.bucketArn}/*`),
          // The default bootstrap's staging bucket, where the console's files wait to be copied.
          'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]',
        ],
      );
    }
    acknowledge(
      this,
      'The console bucket holds only public static files, served through CloudFront, whose requests are what matters.',
      ['AwsSolutions-S1'],
    );
    acknowledge(
      this,
      'CloudFront access logs need a log bucket with ACLs; the API behind /v1 keeps its own access logs.',
      ['AwsSolutions-CFR3'],
    );
    acknowledge(
      this,
      'Operators sign in from anywhere; access is controlled by the OIDC issuer and the API authorizer, not by country.',
      ['AwsSolutions-CFR1'],
    );
    acknowledge(
      this,
      'The console is static files and an API that authorizes every request; a WAF is left to the deploying account.',
      ['AwsSolutions-CFR2'],
    );
    acknowledge(
      this,
      "The default CloudFront domain only offers its own certificate; a custom domain with TLS 1.2+ is the deploying account's choice.",
      ['AwsSolutions-CFR4'],
    );
  }
}
