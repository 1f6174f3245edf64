"""What runs beside the pipeline: bucket provisioning, and a local S3-compatible server."""
