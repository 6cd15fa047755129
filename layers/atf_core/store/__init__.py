"""The task store: an abstract contract and its DynamoDB backend."""
