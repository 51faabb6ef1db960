"""Building a SUB-like benchmark (Bader et al., Sec. 4.2-4.3): the steps around TDG.

* :mod:`.candidates` -- the ``candidates`` job: candidate classes (a classifier on generated
  images), candidate attributes (a VQA scorer on CUB over the threshold grid) and the pairings
  plan that ``generate`` reads (its inputs in :mod:`.candidate_inputs`, its steps and reports in
  :mod:`.candidate_steps`); the formulas are in :mod:`concept_grounding.tdg.candidates`.

The human validation of Sec. 4.3 / App. E (docs/human_validation.md):

* :mod:`.study` -- the annotation model (a study's fields, typed questions and distribution;
  records and responses) and SUB's and ConceptBed's studies declared on it;
* :mod:`.study_store` -- the one SQLite store of any study (k responses per record, leases, hashed
  tokens in :mod:`.study_tokens`; its SQLite layer :mod:`.study_db`, older files converted by
  :mod:`.study_migrate`), its export (:mod:`.study_export`) and Krippendorff's alpha per question
  (:mod:`.agreement`);
* :mod:`.sampling` -- which candidates each study shows (40 per attribute, 3 per pairing);
* :mod:`.annotate_app` -- the one Gradio app, any study a tab (its page's HTML and keys in :mod:`.annotate_page`;
  ``concept-grounding annotate``, whose settings :mod:`.annotate_job` declares and :mod:`.annotate_studies` runs);
* :mod:`.hub_sync` -- optional push of the answers to a Hub dataset repo (CommitScheduler);
* :mod:`.simulate` -- bird-world candidates with known failures and the one simulator of any study;
* :mod:`.curate` -- human scores, discard rules (thresholds in :mod:`.rules`), Krippendorff's
  alpha, annotator accuracy;
* the Human rows of Tables 1-2 from study-2 answers via ``sub_accuracy`` live in
  :mod:`concept_grounding.evaluation.human_rows` (below ``bench``, which shows them);
* :mod:`.figures` -- Figs. 6 and 9; :mod:`.curate_job` -- the ``curate`` job (its settings and
  readers in :mod:`.curate_inputs`, its report and dataset in :mod:`.curate_report`).

ConceptBed's human study (Patel et al., App. G; docs/human_validation.md), in the same store and app:

* :mod:`.rating_study` -- the wording of its question per kind; the study is declared in :mod:`.study`.

This package sits above ``tdg``, ``judge``, ``worldflux``, the world and the loaders, which
it joins (``pyproject.toml``'s import contracts); the human validation of Sec. 4.3
belongs here too.
"""
