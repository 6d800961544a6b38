"""Who a client is: TLS contexts and certificate principals, SASL mechanisms, SCRAM credentials."""
