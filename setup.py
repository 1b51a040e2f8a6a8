"""The one C extension: the record walk Kafka 4's default timestamp window puts on every
produce (src/odradek/protocol/_recordwalk.c). It is optional: without a C compiler the
install still succeeds and protocol.records walks records in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.protocol._recordwalk", ["src/odradek/protocol/_recordwalk.c"],
                             optional=True)])
