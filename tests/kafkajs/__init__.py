"""KafkaJS, the Node.js client, against real brokers (client.js; installed by `make install`)."""
