import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../infra/app.js';

const CONTEXT = {
  'capstan:jwtIssuer': 'https://auth.example.com/',
  'capstan:jwksUrl': 'https://auth.example.com/.well-known/jwks.json',
  'aws:cdk:bundling-stacks': [],
};

let template: Template;
beforeAll(() => {
  template = Template.fromStack(buildApp(new App({ context: CONTEXT })).stateless);
});

describe('the console construct', () => {
  it('keeps the console files in a private bucket that only CloudFront reads, through origin access control', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
    });
    template.resourceCountIs('AWS::CloudFront::OriginAccessControl', 1);
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Principal: { Service: 'cloudfront.amazonaws.com' }, Action: 's3:GetObject' }),
        ]),
      },
    });
  });

  it('answers with security headers and serves the REST API under /v1 on the same origin, uncached', () => {
    template.hasResourceProperties('AWS::CloudFront::ResponseHeadersPolicy', {
      ResponseHeadersPolicyConfig: {
        SecurityHeadersConfig: Match.objectLike({
          ContentSecurityPolicy: Match.objectLike({ ContentSecurityPolicy: Match.anyValue() }),
          StrictTransportSecurity: Match.objectLike({ AccessControlMaxAgeSec: 31_536_000 }),
          FrameOptions: Match.objectLike({ FrameOption: 'DENY' }),
          ContentTypeOptions: Match.objectLike({ Override: true }),
        }),
      },
    });
    template.hasResourceProperties('AWS::CloudFront::Distribution', {
      DistributionConfig: Match.objectLike({
        DefaultRootObject: 'index.html',
        DefaultCacheBehavior: Match.objectLike({ ViewerProtocolPolicy: 'redirect-to-https' }),
        CacheBehaviors: [
          Match.objectLike({ PathPattern: '/v1/*', CachePolicyId: '4135ea2d-6df8-44a3-9df3-4b5a84be39ad' }),
        ],
      }),
    });
  });

  it('writes config.json at deploy with the WebSocket URL of this stack, and needs no Docker to synthesize', () => {
    const deployments = Object.values(template.findResources('Custom::CDKBucketDeployment')) as Array<{
      Properties: Record<string, unknown>;
    }>;
    expect(deployments).toHaveLength(1);
    const [deployment] = deployments;
    // Two sources: the prebuilt files, and config.json whose deploy-time values are markers.
    expect(deployment?.Properties.SourceObjectKeys).toHaveLength(2);
    expect(JSON.stringify(deployment?.Properties.SourceMarkers)).toContain('LiveStreamWebSocketApi');
    expect(deployment?.Properties.DistributionPaths).toEqual(expect.arrayContaining(['/config.json', '/index.html']));
    template.hasOutput('ConsoleUrl', {});
  });
});
