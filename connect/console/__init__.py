"""The web console served at ``/ui``."""
