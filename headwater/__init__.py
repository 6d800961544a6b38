"""Headwater: a Kafka-protocol broker and Kafka-Connect-style workers.

This package is the product's front door (the ``headwater`` command and one-process mode)
and the floor every room stands on: ``headwater.kafka`` (the Kafka wire codec) and
``headwater.properties`` (configuration files and overrides). ``headwater.broker``,
``headwater.connect`` and ``headwater.connectors`` live in their own top-level folders.
"""
