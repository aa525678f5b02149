"""What the learner page and the instructor page both use: heat maps, comparison, parsing, lost connections."""
