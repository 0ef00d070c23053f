"""verl code the CPU run uses (``gdpo_verl.cpu_run`` holds the rest of it): ``cpu_platform``, the CPU platform verl
loads in every process of the run (``VERL_USE_EXTERNAL_MODULES``: this package imports nothing, so that verl can
import it while verl itself is being imported); ``cpu_checkpoint_engine``, the ``cpu_tcp`` weight sync of the
trainers with rollout apart from training; ``composed_config``, what a run was configured with, read from hydra's
record (the run's verdict); ``config_keys``, the config key a misspelled override meant (the supervisor)."""
