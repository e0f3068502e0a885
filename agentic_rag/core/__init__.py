"""The ground floor every other part stands on: errors, settings, evidence, reply schemas, token
accounting, the OpenAI-protocol HTTP client and tracing. Imports nothing else of the package."""
