"""The shared core of the async task framework: schema, store, consumer, gates.

Shipped to the Lambda functions as a layer and imported by the SDK's worker
runtime, so every component runs the same code against the same schema.
"""
