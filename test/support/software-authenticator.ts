import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";

/**
 * A WebAuthn authenticator and client in software, written from the specification (WebAuthn
 * Level 2, §6.1 authenticator data, §6.5.4 attestation objects, §5.8.1 client data; RFC 8152 COSE
 * keys; RFC 8949 CBOR), for tests that drive /auth/v1's passkey endpoints from Node: an ES256 key
 * per credential, attestation "none", assertions signed over authenticatorData ‖ SHA-256(clientDataJSON).
 * It knows nothing of the server's library: what it sends is what a browser and a platform
 * authenticator would send.
 */

const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString("base64url");
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest();

// --- CBOR, the parts COSE keys and attestation objects need ------------------------------------

type Cbor = number | string | Uint8Array | CborMap | { [key: string]: Cbor };
interface CborMap extends Map<Cbor, Cbor> {}

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) {
    const b = Buffer.alloc(3);
    b[0] = (major << 5) | 25;
    b.writeUInt16BE(n, 1);
    return b;
  }
  const b = Buffer.alloc(5);
  b[0] = (major << 5) | 26;
  b.writeUInt32BE(n, 1);
  return b;
}

export function cbor(value: Cbor): Buffer {
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === "string") {
    const bytes = Buffer.from(value, "utf8");
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, v]) => [cbor(k), cbor(v)])]);
}

// --- The authenticator --------------------------------------------------------------------------

const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

export interface SoftCredential {
  /** base64url credential id */
  id: string;
  rawId: Buffer;
  privateKey: KeyObject;
  rpId: string;
  /** The user handle the relying party gave at registration (base64url). */
  userHandle: string;
  counter: number;
}

interface CreationOptions {
  challenge: string;
  rp: { id?: string; name: string };
  user: { id: string; name: string };
  pubKeyCredParams: { alg: number; type: string }[];
}

interface RequestOptions {
  challenge: string;
  rpId?: string;
}

function authData(rpId: string, flags: number, counter: number, attested?: Buffer): Buffer {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(counter, 0);
  return Buffer.concat([sha256(rpId), Buffer.from([flags]), count, ...(attested ? [attested] : [])]);
}

/** The COSE_Key of an ES256 public key (kty EC2, alg -7, crv P-256, x, y). */
function coseKey(publicKey: KeyObject): Buffer {
  const jwk = publicKey.export({ format: "jwk" }) as { x: string; y: string };
  return cbor(
    new Map<Cbor, Cbor>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x, "base64url")],
      [-3, Buffer.from(jwk.y, "base64url")],
    ]),
  );
}

export class SoftwareAuthenticator {
  readonly credentials: SoftCredential[] = [];

  /**
   * navigator.credentials.create(): a new credential for the options' relying party, answered as
   * a browser at `origin` serializes it (RegistrationResponseJSON).
   */
  create(options: CreationOptions, origin: string, overrides: { rpId?: string } = {}) {
    if (!options.pubKeyCredParams.some((p) => p.alg === -7)) throw new Error("ES256 not offered");
    const rpId = overrides.rpId ?? options.rp.id ?? new URL(origin).hostname;
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const rawId = randomBytes(32);
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(rawId.length, 0);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, rawId, coseKey(publicKey)]);
    const data = authData(rpId, FLAG_UP | FLAG_UV | FLAG_AT, 0, attested);
    const clientDataJSON = Buffer.from(
      JSON.stringify({ type: "webauthn.create", challenge: options.challenge, origin, crossOrigin: false }),
    );
    const attestationObject = cbor({ fmt: "none", attStmt: {}, authData: data });
    const credential: SoftCredential = {
      id: b64url(rawId),
      rawId,
      privateKey,
      rpId,
      userHandle: options.user.id,
      counter: 0,
    };
    this.credentials.push(credential);
    return {
      credential,
      json: {
        id: credential.id,
        rawId: credential.id,
        type: "public-key",
        authenticatorAttachment: "platform",
        clientExtensionResults: {},
        response: {
          clientDataJSON: b64url(clientDataJSON),
          attestationObject: b64url(attestationObject),
          transports: ["internal"],
        },
      },
    };
  }

  /**
   * navigator.credentials.get(): an assertion by `credential` (its counter moved on by one unless
   * `counter` says otherwise), as a browser at `origin` serializes it (AuthenticationResponseJSON).
   */
  get(
    options: RequestOptions,
    origin: string,
    credential: SoftCredential,
    overrides: { counter?: number; userHandle?: string; rpId?: string; type?: string } = {},
  ) {
    const counter = overrides.counter ?? credential.counter + 1;
    credential.counter = Math.max(credential.counter, counter);
    const data = authData(overrides.rpId ?? options.rpId ?? credential.rpId, FLAG_UP | FLAG_UV, counter);
    const clientDataJSON = Buffer.from(
      JSON.stringify({
        type: overrides.type ?? "webauthn.get",
        challenge: options.challenge,
        origin,
        crossOrigin: false,
      }),
    );
    const signature = sign("sha256", Buffer.concat([data, sha256(clientDataJSON)]), credential.privateKey);
    return {
      id: credential.id,
      rawId: credential.id,
      type: "public-key",
      authenticatorAttachment: "platform",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(data),
        signature: b64url(signature),
        userHandle: overrides.userHandle ?? credential.userHandle,
      },
    };
  }
}
