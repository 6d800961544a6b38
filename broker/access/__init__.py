"""Who may do what, and how fast: ACLs (``acls.py``), client quotas (``quotas.py``) and the service that
answers both for the request path (``service.py``)."""
