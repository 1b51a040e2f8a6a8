// KafkaJS against a broker: `node client.js SCENARIO BOOTSTRAP TOPIC GROUP` (BOOTSTRAP: host:port[,...]).
// Prints one JSON object with what the scenario saw; runner.py hands it to the tests.
// Any error (a broker answer KafkaJS does not accept, a timeout) exits non-zero with its message.
// Security comes from the environment: KAFKAJS_CA (a PEM file: TLS, trusting that CA), with
// KAFKAJS_CERT and KAFKAJS_KEY a client certificate, and KAFKAJS_SASL ("mechanism:user:password",
// KafkaJS's lower-case mechanism names).
"use strict";

const fs = require("fs");
const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require("kafkajs");

const [scenario, bootstrap, topic, group] = process.argv.slice(2);

function security() {
  const options = {};
  if (process.env.KAFKAJS_CA) {
    options.ssl = { ca: [fs.readFileSync(process.env.KAFKAJS_CA, "utf-8")] };
    if (process.env.KAFKAJS_CERT) {
      options.ssl.cert = fs.readFileSync(process.env.KAFKAJS_CERT, "utf-8");
      options.ssl.key = fs.readFileSync(process.env.KAFKAJS_KEY, "utf-8");
    }
  }
  if (process.env.KAFKAJS_SASL) {
    const [mechanism, username, ...password] = process.env.KAFKAJS_SASL.split(":");
    options.sasl = { mechanism, username, password: password.join(":") };
  }
  return options;
}

const kafka = new Kafka({
  clientId: "odradek-kafkajs-test",
  brokers: bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 3 },
  ...security(),
});

// Consume from the start of `topic` in `groupId` until `count` records have arrived.
async function consumeAll(groupId, count) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const records = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${records.length} of ${count} records in 30 s`)), 30000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          records.push({
            partition,
            offset: Number(message.offset),
            key: message.key === null ? null : message.key.toString(),
            value: message.value === null ? null : message.value.toString(),
            headers: Object.fromEntries(
              Object.entries(message.headers).map(([k, v]) => [k, v === null ? null : v.toString()]),
            ),
          });
          if (records.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return records;
}

async function roundtrip() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const listed = (await admin.listTopics()).includes(topic);

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const plain = Array.from({ length: 30 }, (_, i) => ({
    key: `key-${i % 5}`,
    value: `value-${i}`,
    headers: { index: String(i) },
  }));
  await producer.send({ topic, messages: plain, acks: -1 });
  const gzipped = Array.from({ length: 30 }, (_, i) => ({ key: `key-${i % 5}`, value: `gzip-${i}` }));
  await producer.send({ topic, messages: gzipped, compression: CompressionTypes.GZIP });
  await producer.send({ topic, messages: [{ key: null, value: null }, { key: "", value: "" }] });
  await producer.disconnect();

  const records = await consumeAll(group, 62);
  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const groups = await admin.describeGroups([group]);
  const offsets = await admin.fetchTopicOffsets(topic);
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.deleteTopics({ topics: [topic] });
  const afterDelete = (await admin.listTopics()).includes(topic);
  await admin.disconnect();
  return {
    created,
    listed,
    afterDelete,
    records,
    committed: committed[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })),
    groupState: groups.groups[0].state,
    highWatermarks: offsets.map((o) => ({ partition: o.partition, high: Number(o.high), low: Number(o.low) })),
    partitionLeaders: metadata.topics[0].partitions.map((p) => p.leader),
  };
}

async function transactions() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  const producer = kafka.producer({ transactionalId: `${topic}-txn`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();

  const committed = await producer.transaction();
  await committed.send({ topic, messages: [{ key: "a", value: "committed-0" }, { key: "b", value: "committed-1" }] });
  await committed.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: "7" }] }] });
  await committed.commit();

  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: [{ key: "a", value: "aborted" }] });
  await aborted.abort();

  const last = await producer.transaction();
  await last.send({ topic, messages: [{ key: "c", value: "committed-2" }] });
  await last.commit();
  await producer.disconnect();

  const groupOffsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  await admin.disconnect();
  // read_committed (KafkaJS's default): the aborted record never arrives.
  const records = await consumeAll(`${group}-reader`, 3);
  return {
    values: records.map((r) => r.value).sort(),
    groupOffsets: groupOffsets[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })),
  };
}

// Two members of one group share four partitions; when one leaves, the other takes them all.
async function groups() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true });
  // KafkaJS's setOffsets commits through a paused member of the group and returns after its
  // fetch loop's first turn, which waits the loop's 5 s: the slow step of this scenario.
  await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 1, offset: "3" }] });
  const set = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const assignments = { first: [], second: [] };
  const members = {};
  const joined = (name) =>
    new Promise((resolve) => {
      const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500, heartbeatInterval: 500 });
      members[name] = consumer;
      consumer.on(consumer.events.GROUP_JOIN, (event) => {
        assignments[name].push((event.payload.memberAssignment[topic] || []).slice().sort());
        resolve();
      });
      consumer
        .connect()
        .then(() => consumer.subscribe({ topic, fromBeginning: true }))
        .then(() => consumer.run({ eachMessage: async () => {} }));
    });
  await joined("first");
  const rejoined = new Promise((resolve) => members.first.on(members.first.events.GROUP_JOIN, resolve));
  await joined("second");
  await rejoined;
  const described = await admin.describeGroups([group]);
  const both = described.groups[0].members.length;
  const afterLeave = new Promise((resolve) => members.first.on(members.first.events.GROUP_JOIN, resolve));
  await members.second.disconnect();
  await afterLeave;
  await members.first.disconnect();
  const listed = (await admin.listGroups()).groups.some((g) => g.groupId === group);
  const deleted = await admin.deleteGroups([group]);
  const afterDelete = (await admin.listGroups()).groups.some((g) => g.groupId === group);
  await admin.disconnect();
  return {
    first: assignments.first,
    second: assignments.second,
    membersWhileBoth: both,
    listed,
    setOffsets: set[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })),
    deleted: deleted.map((d) => ({ groupId: d.groupId, errorCode: d.errorCode })),
    afterDelete,
  };
}

// Admin calls KafkaJS users script: partitions, configs, cluster, record deletion.
async function administration() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [{ topic, numPartitions: 1, configEntries: [{ name: "retention.ms", value: "3600000" }] }],
    waitForLeaders: true,
  });
  const describeTopic = async () =>
    Object.fromEntries(
      (
        await admin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ["retention.ms", "cleanup.policy"] }],
        })
      ).resources[0].configEntries.map((e) => [e.configName, e.configValue]),
    );
  const createdWith = await describeTopic();
  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
  const partitions = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length;
  await admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: "cleanup.policy", value: "compact" }] }],
  });
  const altered = await describeTopic();
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ key: "k", value: `v${i}`, partition: 0 })) });
  await producer.disconnect();
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "4" }] });
  const offsets = await admin.fetchTopicOffsets(topic);
  const cluster = await admin.describeCluster();
  await admin.disconnect();
  return {
    partitions,
    createdWith,
    altered,
    partition0: offsets.filter((o) => o.partition === 0).map((o) => ({ low: Number(o.low), high: Number(o.high) }))[0],
    brokers: cluster.brokers.length,
    controller: cluster.controller,
  };
}

// Records through a secured listener (the environment says how), read back in a group.
async function secured() {
  const producer = kafka.producer();
  await producer.connect();
  const values = Array.from({ length: 20 }, (_, i) => `secured-${i}`);
  await producer.send({ topic, messages: values.map((value) => ({ value, partition: 0 })) });
  await producer.disconnect();
  const records = await consumeAll(group, values.length);
  return { values: records.map((r) => r.value) };
}

// A replicated topic in a cluster: each partition's records go to its own leader, acks=all.
async function replicated() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 3 }], waitForLeaders: true });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const values = Array.from({ length: 30 }, (_, i) => `replicated-${i}`);
  await producer.send({ topic, acks: -1, messages: values.map((value, i) => ({ value, partition: i % 3 })) });
  await producer.disconnect();
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  const cluster = await admin.describeCluster();
  await admin.disconnect();
  const records = await consumeAll(group, values.length);
  const sorted = (ids) => ids.slice().sort((a, b) => a - b);
  return {
    values: records.map((r) => r.value).sort(),
    partitions: metadata.topics[0].partitions.map((p) => ({
      leader: p.leader,
      replicas: sorted(p.replicas),
      isr: sorted(p.isr),
    })),
    brokers: sorted(cluster.brokers.map((b) => b.nodeId)),
  };
}

// Numbered records to partition 0, one acks=all send at a time, until "stop" arrives on stdin
// (the test kills the leader meanwhile); "acked N" after every 100 acknowledgements.
async function failover() {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    // Long enough to outlast a killed leader's ZooKeeper session (retries back off to 30 s).
    retry: { retries: 10, initialRetryTime: 200 },
  });
  await producer.connect();
  let stopping = false;
  process.stdin.on("data", (data) => {
    stopping = stopping || data.toString().includes("stop");
  });
  let acked = 0;
  const errors = [];
  while (!stopping && errors.length === 0) {
    try {
      await producer.send({ topic, acks: -1, messages: [{ value: String(acked), partition: 0 }] });
      acked += 1;
      if (acked % 100 === 0) process.stdout.write(`acked ${acked}\n`);
    } catch (error) {
      errors.push(`${error.name}: ${error.message}`);
    }
  }
  await producer.disconnect();
  process.stdin.destroy();
  return { acked, errors };
}

const scenarios = { roundtrip, transactions, groups, administration, secured, replicated, failover };

scenarios[scenario]()
  .then((result) => {
    process.stdout.write(JSON.stringify(result) + "\n");
  })
  .catch((error) => {
    process.stderr.write(`${error.name}: ${error.message}\n`);
    process.exit(1);
  });
