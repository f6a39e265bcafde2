"""Training recipes, checkpoint averaging, BLEU evaluation and the table-reproduction driver."""
