"""The rules and figures several studies share (a study imports these, never another study):
cells           how the training claims read a cell by its seeds' outcome classes (claims 6, 8, 9, 10);
training        the claims on the atlas's training cells (8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup);
transfer        the optimal lr along a size axis and its shift (12 width, 13 depth);
edge_rules      study 11's cells, predictors and scores; boundary_rules the boundary rules (11 and 14);
edge_report     study 11's figures, summary and tables; edge_figures the figures 11 and 14 share;
at_init         the at-init claims' settings in words (3, 5, 7).
"""
