"""The local stack: the whole framework on loopback, with moto's server as the embedded AWS."""
