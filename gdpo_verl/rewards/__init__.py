"""Reward functions, pure Python (no verl): the paper's math rewards (``math_length``, reading answers with
``gdpo_verl.answers``), the coding rewards (``coding``), the tool-calling rewards (``tool_calling``) and the
learning study's task (``learning_study``). verl loads them with
``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.<module>``; the "gdpo_verl" reward manager that
gives them the true response length lives in ``gdpo_verl.verl_adapter.reward_manager``. What a reward needs of a
run (weights in its summed score, a sandbox on every node) it declares itself: ``compute_score.needs``
(``needs``)."""
