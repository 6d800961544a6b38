"""PostgreSQL change data capture (in progress): so far the pgoutput decoder (``pgoutput``)."""
