// What every JavaScript conformance test shares: the namespace from the environment (the pytest
// test that runs `node --test` sets it), the queue names of tests/config.json, and a
// Tag that marks a test's own messages, as tests/sdk.py does for the Python tests.
import { randomUUID } from "node:crypto";
import { ServiceBusAdministrationClient, ServiceBusClient } from "@azure/service-bus";

export const connectionString = required("SERVICEBUS_CONNECTION_STRING");

export const queues = {
  plain: "conformance-plain",
  sessions: "conformance-sessions",
  shortLock: "conformance-short-lock", // LockDuration PT5S, MaxDeliveryCount 3
};

// Topics of tests/config.json: conformance-topic has the subscriptions all ($Default),
// red (color = 'red'), sql (quantity > 10 AND sys.Label LIKE 'order%', SET priority = 'high')
// and more; conformance-topic-sessions has sessions (RequiresSession) and plain.
export const topics = {
  main: "conformance-topic",
  sessions: "conformance-topic-sessions",
};

export const TAG = "conformance-test";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through pytest (test_javascript_sdk.py)`);
  return value;
}

export function client() {
  return new ServiceBusClient(connectionString, { retryOptions: { maxRetries: 0 } });
}

/** One test's mark: its messages carry it, and it receives only those. */
export class Tag {
  constructor() {
    this.id = randomUUID().replaceAll("-", "");
  }

  message(fields = {}) {
    return {
      body: fields.body ?? this.id,
      ...fields,
      applicationProperties: { [TAG]: this.id, ...(fields.applicationProperties ?? {}) },
    };
  }

  owns(message) {
    return message.applicationProperties?.[TAG] === this.id;
  }

  /** Receive until `count` messages of this test arrived or `timeoutMs` passed; other tests'
   * leftovers are completed (peek-lock) or gone (receive-and-delete). */
  async receive(receiver, count, { timeoutMs = 10_000 } = {}) {
    const mine = [];
    const deadline = Date.now() + timeoutMs;
    while (mine.length < count && Date.now() < deadline) {
      const wait = Math.max(500, Math.min(2000, deadline - Date.now()));
      const batch = await receiver.receiveMessages(count - mine.length, { maxWaitTimeInMs: wait });
      for (const message of batch) {
        if (this.owns(message)) mine.push(message);
        else if (receiver.receiveMode === "peekLock") await receiver.completeMessage(message);
      }
    }
    return mine;
  }
}

/** Run `body` with a client, closing it however the body ends. */
export async function withClient(body) {
  const sb = client();
  try {
    return await body(sb);
  } finally {
    await sb.close();
  }
}

/** The SDK's administration client. For the emulator (EMULATOR_HOST and EMULATOR_HTTP_PORT
 * set), with no more than the override Microsoft's emulator documentation gives for
 * JavaScript: the HTTP port in the connection string, requests allowed over plain HTTP, and
 * the client's URLs built on http://host:port. */
export function administration() {
  const host = process.env.EMULATOR_HOST;
  const port = process.env.EMULATOR_HTTP_PORT;
  if (!host || !port) return new ServiceBusAdministrationClient(connectionString);
  const admin = new ServiceBusAdministrationClient(
    `Endpoint=sb://${host}:${port};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;`,
  );
  const internalClient = admin["_httpClient"];
  const originalSendRequest = internalClient.sendRequest.bind(internalClient);
  internalClient.sendRequest = async function (request) {
    request.allowInsecureConnection = true;
    return originalSendRequest(request);
  };
  admin.getUrl = function (path, queryParams) {
    const requestUrl = new URL(`http://${host}:${port}/${path}`);
    requestUrl.searchParams.set("api-version", this.serviceVersion || "2021-05");
    if (queryParams) {
      for (const [key, value] of Object.entries(queryParams)) requestUrl.searchParams.set(key, value);
    }
    return requestUrl.toString();
  };
  return admin;
}

export function unique(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}
