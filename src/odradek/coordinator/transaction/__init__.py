"""The transaction coordinator: sans-I/O core, __transaction_state formats, runtime shell."""
