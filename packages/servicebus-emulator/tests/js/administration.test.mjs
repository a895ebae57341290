// The JavaScript SDK's administration client against the management API: entities created,
// used over AMQP, updated, counted and deleted; the errors Service Bus answers.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Tag, administration, queues, unique, withClient } from "./sdk.mjs";

test("a queue is created, used, updated, counted and deleted", () =>
  withClient(async (sb) => {
    const admin = administration();
    const name = unique("js-admin-queue");
    const created = await admin.createQueue(name, { maxDeliveryCount: 4, lockDuration: "PT20S" });
    try {
      assert.equal(created.maxDeliveryCount, 4);
      assert.equal((await admin.getQueue(name)).lockDuration, "PT20S");
      assert.ok(await admin.queueExists(name));
      const tag = new Tag();
      await sb.createSender(name).sendMessages([tag.message(), tag.message()]);
      const counts = await admin.getQueueRuntimeProperties(name);
      assert.equal(counts.activeMessageCount, 2);
      assert.equal(counts.totalMessageCount, 2);
      const queue = await admin.getQueue(name);
      queue.maxDeliveryCount = 7;
      await admin.updateQueue(queue);
      assert.equal((await admin.getQueue(name)).maxDeliveryCount, 7);
      const names = [];
      for await (const item of admin.listQueues()) names.push(item.name);
      assert.ok(names.includes(name) && names.includes(queues.plain));
    } finally {
      await admin.deleteQueue(name);
    }
    assert.equal(await admin.queueExists(name), false);
  }));

test("a topic, its subscriptions and rules are managed and applied", () =>
  withClient(async (sb) => {
    const admin = administration();
    const topic = unique("js-admin-topic");
    await admin.createTopic(topic);
    try {
      await admin.createSubscription(topic, "chosen", {
        defaultRuleOptions: { name: "big", filter: { sqlExpression: "quantity > 10" } },
      });
      await admin.createRule(topic, "chosen", "vip", { applicationProperties: { tier: "vip" } });
      const rules = [];
      for await (const rule of admin.listRules(topic, "chosen")) rules.push(rule.name);
      assert.deepEqual(rules.sort(), ["big", "vip"]);
      assert.equal((await admin.getTopicRuntimeProperties(topic)).subscriptionCount, 1);
      const tag = new Tag();
      await sb.createSender(topic).sendMessages([
        tag.message({ body: "small", applicationProperties: { quantity: 2 } }),
        tag.message({ body: "big", applicationProperties: { quantity: 20 } }),
        tag.message({ body: "vip", applicationProperties: { tier: "vip" } }),
      ]);
      const receiver = sb.createReceiver(topic, "chosen", { receiveMode: "receiveAndDelete" });
      const received = await tag.receive(receiver, 3, { timeoutMs: 4000 });
      assert.deepEqual(received.map((m) => m.body).sort(), ["big", "vip"]);
      await admin.deleteRule(topic, "chosen", "vip");
      assert.equal(await admin.ruleExists(topic, "chosen", "vip"), false);
    } finally {
      await admin.deleteTopic(topic);
    }
  }));

test("the management API answers with Service Bus's errors", async () => {
  const admin = administration();
  await assert.rejects(admin.createQueue(queues.plain), { code: "MessageEntityAlreadyExistsError" });
  await assert.rejects(admin.getQueue(unique("missing")), { code: "MessageEntityNotFoundError" });
  await assert.rejects(admin.getSubscription(unique("missing"), "none"), {
    code: "MessageEntityNotFoundError",
  });
  const properties = await admin.getNamespaceProperties();
  assert.ok(properties.name);
});
