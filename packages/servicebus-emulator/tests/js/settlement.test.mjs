// Settlement through the official JavaScript SDK: what it does differently from the Python SDK
// (no message id unless the sender sets one; propertiesToModify on abandon, defer, dead-letter).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Tag, queues, withClient } from "./sdk.mjs";

test("a message sent without a message id gets one from the broker and can be completed", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    const sender = sb.createSender(queues.plain);
    await sender.sendMessages(tag.message({ body: "no id" }));
    const receiver = sb.createReceiver(queues.plain);
    const [message] = await tag.receive(receiver, 1);
    assert.ok(message.messageId, "the broker assigned no message id");
    await receiver.completeMessage(message);
    assert.deepEqual(await tag.receive(receiver, 1, { timeoutMs: 1000 }), []);
  }));

test("subscribe() completes messages sent without a message id", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(queues.plain).sendMessages([1, 2, 3].map((n) => tag.message({ body: `s${n}` })));
    const receiver = sb.createReceiver(queues.plain);
    const seen = [];
    const errors = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${seen.length} of 3 arrived`)), 20_000);
      const subscription = receiver.subscribe(
        {
          async processMessage(message) {
            if (!tag.owns(message)) return;
            seen.push(message.body);
            if (seen.length === 3) {
              clearTimeout(timer);
              setTimeout(() => subscription.close().then(resolve, reject), 500);
            }
          },
          async processError(args) {
            errors.push(args.error);
          },
        },
        { autoCompleteMessages: true },
      );
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(seen.sort(), ["s1", "s2", "s3"]);
    assert.deepEqual(await tag.receive(receiver, 1, { timeoutMs: 1000 }), [], "a message stayed on the queue");
  }));

test("abandon with propertiesToModify redelivers the message with them", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(queues.plain).sendMessages(tag.message({ applicationProperties: { attempt: 1, keep: "yes" } }));
    const receiver = sb.createReceiver(queues.plain);
    const [first] = await tag.receive(receiver, 1);
    await receiver.abandonMessage(first, { attempt: 2, reason: "busy" });
    const [again] = await tag.receive(receiver, 1);
    assert.equal(again.deliveryCount, 1);
    assert.equal(again.applicationProperties.attempt, 2);
    assert.equal(again.applicationProperties.reason, "busy");
    assert.equal(again.applicationProperties.keep, "yes");
    await receiver.completeMessage(again);
  }));

test("defer with propertiesToModify keeps them on the deferred message", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(queues.plain).sendMessages(tag.message());
    const receiver = sb.createReceiver(queues.plain);
    const [first] = await tag.receive(receiver, 1);
    await receiver.deferMessage(first, { parked: "by-js" });
    const [deferred] = await receiver.receiveDeferredMessages([first.sequenceNumber]);
    assert.equal(deferred.applicationProperties.parked, "by-js");
    // Settled through the management link (a deferred message), with properties to modify.
    await receiver.deadLetterMessage(deferred, {
      deadLetterReason: "Parked",
      deadLetterErrorDescription: "deferred, then given up",
      step: "dead",
    });
    const dead = sb.createReceiver(queues.plain, { subQueueType: "deadLetter" });
    const [letter] = await tag.receive(dead, 1);
    assert.equal(letter.deadLetterReason, "Parked");
    assert.equal(letter.deadLetterErrorDescription, "deferred, then given up");
    assert.equal(letter.applicationProperties.parked, "by-js");
    assert.equal(letter.applicationProperties.step, "dead");
    await dead.completeMessage(letter);
  }));

test("dead-letter with propertiesToModify on the receive link", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(queues.plain).sendMessages(tag.message());
    const receiver = sb.createReceiver(queues.plain);
    const [message] = await tag.receive(receiver, 1);
    await receiver.deadLetterMessage(message, { deadLetterReason: "Bad", origin: "link" });
    const dead = sb.createReceiver(queues.plain, { subQueueType: "deadLetter" });
    const [letter] = await tag.receive(dead, 1);
    assert.equal(letter.deadLetterReason, "Bad");
    assert.equal(letter.applicationProperties.origin, "link");
    await dead.completeMessage(letter);
  }));

test("abandon of a deferred message with propertiesToModify (update-disposition)", () =>
  withClient(async (sb) => {
    const tag = new Tag();
    await sb.createSender(queues.plain).sendMessages(tag.message());
    const receiver = sb.createReceiver(queues.plain);
    const [first] = await tag.receive(receiver, 1);
    await receiver.deferMessage(first);
    const [deferred] = await receiver.receiveDeferredMessages([first.sequenceNumber]);
    await receiver.abandonMessage(deferred, { through: "management" });
    const [again] = await receiver.receiveDeferredMessages([first.sequenceNumber]);
    assert.equal(again.applicationProperties.through, "management");
    assert.equal(again.deliveryCount, 1);
    await receiver.completeMessage(again);
  }));
