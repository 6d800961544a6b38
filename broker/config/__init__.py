"""The broker's settings: its properties (``broker_config.py``), Kafka's topic config table
(``topic_configs.py``), the dynamic broker configs (``dynamic_configs.py``) and the atomically replaced
JSON files small broker state is kept in (``state_file.py``)."""
