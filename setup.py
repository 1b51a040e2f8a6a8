"""The one C extension: the produce path's per-batch checks, including the record walk Kafka
4's default timestamp window puts on every produce (src/odradek/protocol/_fastpath.c). It
is optional: without a C compiler the install still succeeds and every batch is checked
in Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("odradek.protocol._fastpath", ["src/odradek/protocol/_fastpath.c"], optional=True)
    ]
)
