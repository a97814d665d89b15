"""The Hugging Face Hub: a small client for the reads `llm-eks models add` makes (`client`), and the model records
it writes into the user's app, which synth and `llm-eks plan` read offline (`records`). Pure Python."""
