"""IAM policy documents kept as data (JSON), each named after the upstream release it was written from."""
