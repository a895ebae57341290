// Topics and subscriptions through the official JavaScript SDK: fan-out, a correlation filter,
// a SQL filter with its action, a session subscription.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Tag, topics, withClient } from "./sdk.mjs";

test("each subscription gets the copies its rules select", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(topics.main).sendMessages([
      tag.message({ body: "red", applicationProperties: { color: "red" } }),
      tag.message({ body: "blue", applicationProperties: { color: "blue" } }),
    ]);
    const every = sb.createReceiver(topics.main, "all", { receiveMode: "receiveAndDelete" });
    assert.deepEqual((await tag.receive(every, 2)).map((m) => m.body).sort(), ["blue", "red"]);
    const red = sb.createReceiver(topics.main, "red", { receiveMode: "receiveAndDelete" });
    assert.deepEqual((await tag.receive(red, 2, { timeoutMs: 3000 })).map((m) => m.body), ["red"]);
  }));

test("a SQL filter selects and its action changes the subscription's copy", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(topics.main).sendMessages([
      tag.message({ body: "small", subject: "order-1", applicationProperties: { quantity: 5 } }),
      tag.message({ body: "big", subject: "order-2", applicationProperties: { quantity: 50, internal: 1 } }),
    ]);
    const sql = sb.createReceiver(topics.main, "sql", { receiveMode: "receiveAndDelete" });
    const received = await tag.receive(sql, 2, { timeoutMs: 3000 });
    assert.deepEqual(received.map((m) => m.body), ["big"]);
    assert.equal(received[0].applicationProperties.priority, "high");
    assert.equal(received[0].applicationProperties.RuleName, "big-orders");
    assert.equal("internal" in received[0].applicationProperties, false);
    await tag.receive(sb.createReceiver(topics.main, "all", { receiveMode: "receiveAndDelete" }), 2);
  }));

test("a session subscription hands out its sessions", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    const sessionId = `js-${tag.id}`;
    await sb.createSender(topics.sessions).sendMessages(
      [0, 1, 2].map((n) => tag.message({ body: `s${n}`, sessionId })),
    );
    const receiver = await sb.acceptSession(topics.sessions, "sessions", sessionId);
    const received = await tag.receive(receiver, 3);
    assert.deepEqual(received.map((m) => m.body), ["s0", "s1", "s2"]);
    for (const message of received) await receiver.completeMessage(message);
    await receiver.close();
    await tag.receive(sb.createReceiver(topics.sessions, "plain", { receiveMode: "receiveAndDelete" }), 3);
  }));
