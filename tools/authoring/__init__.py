"""The book's build: export the chapters into the packages, pair the notebooks, render and
check the HTML book, set up the environment."""
