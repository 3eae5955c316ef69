"""What a person reads of a run: its report.html (`html.py`), whose lead puts the strategy beside
its baseline first (`lead.py`) above its tables (`tables.py`) and figures (`plots.py`), and the
loggers that show a run's figures as it goes (`loggers.py`: console, wandb). Nothing here is
re-exported: import the module that holds a name."""
