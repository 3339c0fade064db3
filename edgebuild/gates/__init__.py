"""Gates: accuracy, latency and size, evaluated from cached measurements."""
