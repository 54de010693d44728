"""The records that `seal eval` writes and `seal report` reads: pass rates, endings, tables and the eval
folder's file names. They live below both `seal.evaluation` and `seal.reports`, which import them and not each
other."""
