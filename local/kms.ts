import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { signDigestP256 } from './ecdsa-p256.js';
import { AwsServiceError, type JsonService, requireString, startJsonService } from './aws-json.js';

export interface LocalKmsOptions {
  readonly port: number;
  /** The PEM (PKCS#8) of the local evidence key; created on first start, kept across restarts. */
  readonly keyFile: string;
  readonly region: string;
  readonly account: string;
  /** The alias the deployment configures (`alias/<prefix>-evidence`). */
  readonly alias: string;
}

export interface LocalKms extends JsonService {
  /** The key's ARN, which `GetPublicKey` and `Sign` answer with. */
  readonly keyArn: string;
}

function loadOrCreateKey(file: string) {
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  return createPrivateKey(readFileSync(file, 'utf8'));
}

const blob = (input: Record<string, unknown>, field: string) => Buffer.from(requireString(input, field), 'base64');

/**
 * A local KMS endpoint (AWS JSON 1.1, `TrentService`) with one asymmetric ECC_NIST_P256
 * SIGN_VERIFY key: `GetPublicKey` and `Sign` (ECDSA_SHA_256, RAW or DIGEST), the two operations
 * the evidence signer calls. The key id is derived from the public key, so it stays the same as
 * long as the key file does.
 */
export async function startLocalKms(options: LocalKmsOptions): Promise<LocalKms> {
  const privateKey = loadOrCreateKey(options.keyFile);
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const digest = createHash('sha256').update(spki).digest('hex');
  const keyId = `${digest.slice(0, 8)}-${digest.slice(8, 12)}-4${digest.slice(13, 16)}-8${digest.slice(17, 20)}-${digest.slice(20, 32)}`;
  const keyArn = `arn:aws:kms:${options.region}:${options.account}:key/${keyId}`;
  const known = new Set([
    keyId,
    keyArn,
    options.alias,
    `arn:aws:kms:${options.region}:${options.account}:${options.alias}`,
  ]);
  const requireKey = (input: Record<string, unknown>) => {
    const id = requireString(input, 'KeyId');
    if (!known.has(id)) throw new AwsServiceError('NotFoundException', `Key '${id}' does not exist`);
  };
  const service = await startJsonService({
    port: options.port,
    targetPrefix: 'TrentService',
    operations: {
      GetPublicKey: (input) => {
        requireKey(input);
        return {
          KeyId: keyArn,
          PublicKey: spki.toString('base64'),
          KeySpec: 'ECC_NIST_P256',
          KeyUsage: 'SIGN_VERIFY',
          SigningAlgorithms: ['ECDSA_SHA_256'],
        };
      },
      Sign: (input) => {
        requireKey(input);
        if (input.SigningAlgorithm !== 'ECDSA_SHA_256')
          throw new AwsServiceError('InvalidKeyUsageException', 'the key signs with ECDSA_SHA_256 only');
        const message = blob(input, 'Message');
        const type = input.MessageType ?? 'RAW';
        if (type === 'DIGEST' && message.length !== 32)
          throw new AwsServiceError('ValidationException', 'a DIGEST message must be 32 bytes for ECDSA_SHA_256');
        if (type === 'RAW' && message.length > 4096)
          throw new AwsServiceError('ValidationException', 'a RAW message is at most 4096 bytes');
        const signature =
          type === 'DIGEST'
            ? signDigestP256(privateKey, message)
            : sign('sha256', message, { key: privateKey, dsaEncoding: 'der' });
        return { KeyId: keyArn, Signature: signature.toString('base64'), SigningAlgorithm: 'ECDSA_SHA_256' };
      },
    },
  });
  return { ...service, keyArn };
}
