"""Quality levers: techniques that rewrite the float model around the quantizer."""
