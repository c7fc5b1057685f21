"""`maxcode optimize`: the pipeline's search on one program or kernel a user brings."""
