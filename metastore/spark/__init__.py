"""Every node's Spark catalog: the image projected into Spark, and queries through Spark SQL."""
